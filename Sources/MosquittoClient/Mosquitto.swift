import CMosquitto

#if canImport(Glibc)
    import Glibc
    import MQTTVocabulary
#endif

// The C boundary: the only file besides MosquittoConnection.swift and its extensions that
// touches libmosquitto's types. Conversions between Swift values and mosquitto_property lists live here.

/// `mosquitto_lib_init()` exactly once, before any handle exists (docs/mqtt-notes.md §10). A global
/// `let` is initialised lazily and thread-safely (swift_once).
let mosquittoLibraryInitialised: Bool = mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue

/// A libmosquitto client handle.
///
/// `@unchecked Sendable` at the C boundary. Why it is safe: libmosquitto is built thread-safe and
/// we run it in "threaded" mode (`mosquitto_threaded_set`), where publish/subscribe from other
/// threads only queue packets under its internal mutexes. `MosquittoConnection` additionally
/// serialises every call from threads other than its network thread under its session lock and
/// refuses them once its session machine has released the client; only the network thread
/// destroys it, after its last `mosquitto_loop` (or the caller of a stop before any thread ran).
struct MosquittoHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

/// libmosquitto's error code as a Swift error value.
enum MosquittoCode {
    static let success = MOSQ_ERR_SUCCESS.rawValue
    static let noConnection = MOSQ_ERR_NO_CONN.rawValue
    /// The keep-alive check closed the connection: no packet read for 2 × keepalive.
    static let keepAliveExpired = MOSQ_ERR_KEEPALIVE.rawValue

    /// Our error for a libmosquitto return code; `detail` adds what its log said (TLS errors).
    static func error(_ rc: Int32, context: String, detail: String? = nil) -> MQTTError {
        let text = String(cString: mosquitto_strerror(rc))
        var message = "\(context): \(text)"
        if let detail, !detail.isEmpty { message += " — \(detail)" }
        let kind: MQTTError.Kind
        switch rc {
        case MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue, MOSQ_ERR_OCSP.rawValue: kind = .tls
        case MOSQ_ERR_ERRNO.rawValue:
            kind = .network
            message = "\(context): \(String(cString: strerror(errno)))"
            if let detail, !detail.isEmpty { message += " — \(detail)" }
        case MOSQ_ERR_EAI.rawValue, MOSQ_ERR_LOOKUP.rawValue: kind = .network
        case MOSQ_ERR_CONN_LOST.rawValue, MOSQ_ERR_KEEPALIVE.rawValue, MOSQ_ERR_NO_CONN.rawValue: kind = .connectionLost
        case MOSQ_ERR_CONN_REFUSED.rawValue, MOSQ_ERR_AUTH.rawValue: kind = .connectionRefused
        case MOSQ_ERR_INVAL.rawValue, MOSQ_ERR_MALFORMED_UTF8.rawValue, MOSQ_ERR_PAYLOAD_SIZE.rawValue,
            MOSQ_ERR_OVERSIZE_PACKET.rawValue:
            kind = .invalidArgument
        case MOSQ_ERR_NOT_SUPPORTED.rawValue, MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue,
            MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue:
            kind = .unsupported
        default: kind = .library
        }
        return MQTTError(kind: kind, message: message, code: Int(rc))
    }

    /// Our error for a refused CONNACK (MQTT 3.1.1 return code or MQTT 5 reason code).
    static func connackRefusal(_ code: Int32, version: MQTTProtocolVersion) -> MQTTError {
        let text: String
        switch version {
        case .v311: text = String(cString: mosquitto_connack_string(code))
        case .v5: text = String(cString: mosquitto_reason_string(code))
        }
        return MQTTError(kind: .connectionRefused, message: "broker refused the connection: \(text)", code: Int(code))
    }

    /// Our error for an MQTT 5 failure reason code (≥ 0x80) in PUBACK/PUBREC/SUBACK.
    static func rejection(_ code: Int32, context: String) -> MQTTError {
        MQTTError(
            kind: .rejected, message: "\(context): \(String(cString: mosquitto_reason_string(code)))",
            code: Int(code))
    }
}

private func propertyID(_ p: mqtt5_property) -> Int32 { Int32(p.rawValue) }

/// The property list of the last publish that had properties, reused while the next publishes
/// carry the same ones (a bridge rule's publishes do): building a list costs libmosquitto an
/// allocation or two per property and message. `mosquitto_publish_v5` copies what it keeps, so
/// the list stays ours; it is freed when replaced and with this value.
///
/// `@unchecked Sendable` at the C boundary: the list is libmosquitto memory no one else points to,
/// reached only through this value, which lives in a lock (`MosquittoConnection.propertyList`).
struct PublishPropertyList: ~Copyable, @unchecked Sendable {
    private var properties: MQTTPublishProperties?
    private var list: OpaquePointer?

    init() {}

    deinit {
        var list = list
        if list != nil { mosquitto_property_free_all(&list) }
    }

    /// Calls `body` with the list for `properties` (the kept one when they are the same).
    /// Returns libmosquitto's error code when it refuses a value (nothing is kept then).
    mutating func with(_ properties: MQTTPublishProperties, _ body: (OpaquePointer?) -> Int32) -> Int32 {
        if self.properties != properties {
            if list != nil { mosquitto_property_free_all(&list) }
            self.properties = nil
            let rc = MosquittoProperties.make(properties, into: &list)
            guard rc == MosquittoCode.success else {
                if list != nil { mosquitto_property_free_all(&list) }
                return rc
            }
            self.properties = properties
        }
        return body(list)
    }
}

/// Building and reading MQTT 5 property lists.
enum MosquittoProperties {
    /// A property list for PUBLISH; the caller frees it with `mosquitto_property_free_all`.
    /// Returns an error code when libmosquitto refuses a value (e.g. invalid UTF-8).
    static func make(_ properties: MQTTPublishProperties, into list: inout OpaquePointer?) -> Int32 {
        var rc = MosquittoCode.success
        func check(_ code: Int32) { if rc == MosquittoCode.success { rc = code } }
        for user in properties.userProperties {
            check(mosquitto_property_add_string_pair(&list, propertyID(MQTT_PROP_USER_PROPERTY), user.name, user.value))
        }
        if let contentType = properties.contentType {
            check(mosquitto_property_add_string(&list, propertyID(MQTT_PROP_CONTENT_TYPE), contentType))
        }
        if let expiry = properties.messageExpiry {
            check(mosquitto_property_add_int32(&list, propertyID(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL), expiry))
        }
        if let indicator = properties.payloadFormatIndicator {
            check(mosquitto_property_add_byte(&list, propertyID(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR), indicator))
        }
        if let topic = properties.responseTopic {
            check(mosquitto_property_add_string(&list, propertyID(MQTT_PROP_RESPONSE_TOPIC), topic))
        }
        if let data = properties.correlationData {
            if data.count > Int(UInt16.max) { check(MOSQ_ERR_INVAL.rawValue) }
            data.withUnsafeBytes { bytes in
                check(
                    mosquitto_property_add_binary(
                        &list, propertyID(MQTT_PROP_CORRELATION_DATA), bytes.baseAddress, UInt16(bytes.count)))
            }
        }
        return rc
    }

    /// Copies the PUBLISH properties we understand out of a list owned by libmosquitto.
    static func read(_ list: OpaquePointer?) -> MQTTPublishProperties {
        var result = MQTTPublishProperties()
        var cursor = list
        while let property = cursor {
            let identifier = mosquitto_property_identifier(property)
            switch identifier {
            case propertyID(MQTT_PROP_USER_PROPERTY):
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string_pair(property, identifier, &name, &value, false) != nil,
                    let name, let value
                {
                    result.userProperties.append(MQTTUserProperty(String(cString: name), String(cString: value)))
                }
                free(name)
                free(value)
            case propertyID(MQTT_PROP_CONTENT_TYPE), propertyID(MQTT_PROP_RESPONSE_TOPIC):
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string(property, identifier, &value, false) != nil, let value {
                    if identifier == propertyID(MQTT_PROP_CONTENT_TYPE) {
                        result.contentType = String(cString: value)
                    } else {
                        result.responseTopic = String(cString: value)
                    }
                }
                free(value)
            case propertyID(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL):
                var value: UInt32 = 0
                if mosquitto_property_read_int32(property, identifier, &value, false) != nil {
                    result.messageExpiry = value
                }
            case propertyID(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR):
                var value: UInt8 = 0
                if mosquitto_property_read_byte(property, identifier, &value, false) != nil {
                    result.payloadFormatIndicator = value
                }
            case propertyID(MQTT_PROP_CORRELATION_DATA):
                var value: UnsafeMutableRawPointer?
                var length: UInt16 = 0
                if mosquitto_property_read_binary(property, identifier, &value, &length, false) != nil {
                    if let value {
                        result.correlationData = Array(UnsafeRawBufferPointer(start: value, count: Int(length)))
                    } else {
                        result.correlationData = []
                    }
                }
                free(value)
            default:
                break
            }
            cursor = mosquitto_property_next(property)
        }
        return result
    }
}

/// MQTT 5 subscription option bits (MQTT 5 §3.8.3.1) for `mosquitto_subscribe_v5`.
func subscriptionOptions(_ subscription: MQTTSubscription) -> Int32 {
    var options: Int32 = 0
    if subscription.noLocal { options |= Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) }
    if subscription.retainAsPublished { options |= Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue) }
    switch subscription.retainHandling {
    case .sendAlways: options |= Int32(MQTT_SUB_OPT_SEND_RETAIN_ALWAYS.rawValue)
    case .sendIfNew: options |= Int32(MQTT_SUB_OPT_SEND_RETAIN_NEW.rawValue)
    case .never: options |= Int32(MQTT_SUB_OPT_SEND_RETAIN_NEVER.rawValue)
    }
    return options
}

extension MosquittoCode {
    /// libmosquitto's own check of an MQTT string's characters (`mosquitto_validate_utf8`, which
    /// `mosquitto_new`, `mosquitto_username_pw_set`, `mosquitto_will_set`, publishes and
    /// subscriptions call). `MQTTClientLimits.stringProblem` states the same rule for
    /// `MQTTConfiguration.problems` and the config loader; MosquittoClientTests compares the two.
    static func acceptsCharacters(of text: String) -> Bool {
        text.withCString { mosquitto_validate_utf8($0, Int32(text.utf8.count)) } == success
    }
}
