import BridgeVocabulary
import MQTTVocabulary

/// `[bridge.mqtt]`: broker, client id, protocol, TLS, session, status topic (docs/contract.md §4).
extension LoadContext {
    func readMQTT(_ reader: TableReader, bridge: String) -> MQTTSettings {
        reader.rejectUnknownKeys(allowed: Self.mqttKeys)
        var settings = MQTTSettings(clientID: "pusher-mqtt-bridge-\(bridge)", statusTopic: "pusher-mqtt-bridge/\(bridge)/status")
        if let host = reader.nonEmptyString("host") { settings.host = host }
        settings.useTLS = reader.bool("tls") ?? false
        settings.port = reader.port("port") ?? (settings.useTLS ? 8883 : 1883)
        readBrokerHosts(reader, defaultPort: settings.useTLS ? 8883 : 1883, into: &settings)
        settings.caFile = reader.existingFile("ca_file")
        settings.certFile = reader.existingFile("cert_file")
        settings.keyFile = reader.existingFile("key_file")
        if reader.has("cert_file") != reader.has("key_file") {
            report(reader.path.key(reader.has("cert_file") ? "cert_file" : "key_file"), "cert_file and key_file must be set together")
        }
        settings.tlsInsecure = reader.bool("tls_insecure") ?? false
        // The MQTT client's own limits (MQTTClientLimits, checked again when the client is made):
        // whatever `run` would refuse, `check` refuses here, at the key.
        if let clientID = reader.nonEmptyString("client_id") {
            if let problem = MQTTClientLimits.clientIDProblem(clientID) {
                report(reader.path.key("client_id"), problem)
            } else {
                settings.clientID = clientID
            }
        }
        if let username = reader.nonEmptyString("username") {
            if let problem = MQTTClientLimits.usernameProblem(username) {
                report(reader.path.key("username"), problem)
            } else {
                settings.username = username
            }
        }
        settings.password = reader.secret("password")
        if settings.password != nil, !reader.has("username") {
            report(reader.path.key(reader.has("password") ? "password" : "password_file"), "a password needs a username")
        }
        if let level = reader.int("protocol", in: 4...5) {
            settings.protocolVersion = level == 5 ? .v5 : .v311
        }
        settings.cleanSession = reader.bool("clean_session") ?? false
        if let keepalive = reader.duration("keepalive", allowZero: true) {
            if let problem = MQTTClientLimits.keepAliveProblem(keepalive) {
                report(reader.path.key("keepalive"), problem)
            } else {
                settings.keepalive = keepalive
            }
        }
        if let expiry = reader.duration("session_expiry", allowZero: true) {
            if let problem = MQTTClientLimits.sessionExpiryProblem(expiry) {
                report(reader.path.key("session_expiry"), problem)
            } else {
                settings.sessionExpiry = expiry
            }
        }
        settings.drainRate = readDrainRate(reader)
        for key in ["status_topic", "dead_letter_topic"] {
            guard let topic = reader.nonEmptyString(key) else { continue }
            if let problem = Self.mqttTopicProblem(topic) {
                report(reader.path.key(key), problem)
            } else if key == "status_topic" {
                settings.statusTopic = topic
            } else {
                settings.deadLetterTopic = topic
            }
        }
        return settings
    }
}
