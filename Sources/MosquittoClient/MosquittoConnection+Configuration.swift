import CMosquitto

/// Applying `MQTTConfiguration` to the libmosquitto handle: protocol options, credentials, TLS,
/// the Last Will, and the CONNECT properties (Session Expiry Interval).
extension MosquittoConnection {
    /// Applies the options that stay the same for every connection.
    static func configure(_ mosq: OpaquePointer, _ configuration: MQTTConfiguration) throws(MQTTError) {
        func check(_ rc: Int32, _ what: String) throws(MQTTError) {
            guard rc == MosquittoCode.success else {
                var error = MosquittoCode.error(rc, context: what)
                error.kind = .invalidConfiguration
                throw error
            }
        }
        let level = configuration.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, level), "setting the protocol version")
        // Nagle off: at 5k msg/s it cost 31 ms at p99.9 (docs/mqtt-notes.md §9).
        try check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "setting TCP_NODELAY")
        let window = Int32(min(configuration.maxInFlight, 65535))
        try check(mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, window), "setting the send maximum")
        try check(mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, window), "setting the receive maximum")
        // We call libmosquitto from several threads but run the loop ourselves.
        try check(mosquitto_threaded_set(mosq, true), "enabling threaded mode")
        if let username = configuration.username {
            try check(mosquitto_username_pw_set(mosq, username, configuration.password), "setting credentials")
        }
        if let tls = configuration.tls {
            // No CA given: the operating system's trust store (docs/mqtt-notes.md §11). mosquitto_tls_set
            // needs a CA file or directory, so a client certificate without a CA uses Debian's
            // hashed store directly.
            var caDirectory = tls.caDirectory
            if tls.caFile == nil && caDirectory == nil {
                try check(mosquitto_int_option(mosq, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "using the system trust store")
                if tls.certificateFile != nil { caDirectory = "/etc/ssl/certs" }
            }
            if tls.caFile != nil || caDirectory != nil {
                try check(
                    mosquitto_tls_set(mosq, tls.caFile, caDirectory, tls.certificateFile, tls.keyFile, nil),
                    "configuring TLS (check that ca_file, cert_file and key_file exist and are readable)")
            }
            try check(mosquitto_tls_insecure_set(mosq, tls.insecure), "setting tls_insecure")
        }
        if let will = configuration.will {
            // User properties exist in MQTT 5 only; libmosquitto owns the list once the call succeeds.
            var properties: OpaquePointer?
            if configuration.protocolVersion == .v5 {
                for user in will.userProperties {
                    try check(
                        mosquitto_property_add_string_pair(&properties, Int32(MQTT_PROP_USER_PROPERTY.rawValue), user.name, user.value),
                        "setting the Last Will's properties")
                }
            }
            let list = properties
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain, list)
            }
            if rc != MosquittoCode.success { mosquitto_property_free_all(&properties) }
            try check(rc, "setting the Last Will")
        }
    }

    /// The CONNECT properties for every connection attempt; the caller frees them with
    /// `mosquitto_property_free_all`.
    func connectProperties() -> OpaquePointer? {
        var properties: OpaquePointer?
        if configuration.protocolVersion == .v5 {
            // docs/mqtt-notes.md §4: without this property an MQTT 5 session ends with the connection.
            let expiry = configuration.cleanSession ? 0 : UInt32(configuration.sessionExpiry.seconds.rounded())
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry)
        }
        return properties
    }
}
