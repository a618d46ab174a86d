import MQTTVocabulary

/// `[bridge.cluster]` (docs/contract.md §7.4):
///
/// | key | type | default |
/// |---|---|---|
/// | group | [a-z0-9_-]+, at most 64 bytes | required |
/// | instance | [a-z0-9_-]+ after `${VAR}`, at most 64 bytes | required |
/// | membership_topic | topic without wildcards, not `$…`, no trailing `/` | pusher-mqtt-bridge/cluster/GROUP |
/// | heartbeat_interval | duration, 100ms…60s | 1s |
/// | member_timeout | duration, at least 2 × heartbeat_interval | 3s |
/// | join_settle | duration, 0…60s | 2s |
/// | mqtt_to_pusher | "shared" or "partition" | shared |
///
/// A cluster needs MQTT 5 (shared subscriptions, the Will's and the loop guard's user properties),
/// so `protocol = 4` is an error.
extension LoadContext {
    static let clusterKeys = ConfigKey.names(in: .cluster)
    /// The longest group or instance name: they end up in client ids, topics and directory names.
    static let maximumClusterNameLength = 64

    /// Reads `[bridge.cluster]`; nil when a required key is missing or invalid (the problem is reported).
    func readCluster(_ reader: TableReader, mqtt: MQTTSettings, mqttPath: ConfigKeyPath) -> ClusterSettings? {
        reader.rejectUnknownKeys(allowed: Self.clusterKeys)
        let group = clusterName(reader, "group", what: "group")
        let instance = clusterName(reader, "instance", what: "instance")
        if mqtt.protocolVersion == .v311 {
            report(
                mqttPath.key("protocol"),
                "a cluster ([bridge.cluster]) needs MQTT 5: its MQTT -> Pusher subscriptions are shared ($share/<group>/…) "
                    + "and its membership uses user properties; remove protocol = 4"
            )
        }
        var membershipTopic: String?
        if let topic = reader.nonEmptyString("membership_topic") {
            if let problem = Self.mqttTopicProblem(topic) {
                report(reader.path.key("membership_topic"), problem)
            } else if topic.hasPrefix("$") {
                report(reader.path.key("membership_topic"), "topics starting with '$' are reserved for the broker")
            } else if topic.hasSuffix("/") {
                report(reader.path.key("membership_topic"), "must not end with '/' (the member topics are added as levels below it)")
            } else {
                membershipTopic = topic
            }
        }
        let heartbeat = reader.duration("heartbeat_interval", minimum: .milliseconds(100))
        if let heartbeat, heartbeat > .seconds(60) {
            report(reader.path.key("heartbeat_interval"), "must be at most 60s")
        }
        let heartbeatInterval = heartbeat.flatMap { $0 <= .seconds(60) ? $0 : nil } ?? .seconds(1)
        var memberTimeout = Duration.seconds(3)
        if let timeout = reader.duration("member_timeout") {
            if timeout < heartbeatInterval * 2 {
                report(
                    reader.path.key("member_timeout"),
                    "must be at least twice heartbeat_interval (\(CheckReport.format(heartbeatInterval * 2))), "
                        + "so one late heartbeat does not make a live member dead")
            } else {
                memberTimeout = timeout
            }
        } else if reader.has("heartbeat_interval"), memberTimeout < heartbeatInterval * 2 {
            report(
                reader.path.key("heartbeat_interval"),
                "with the default member_timeout of 3s, heartbeat_interval is at most 1500ms; set member_timeout too")
        }
        var joinSettle = Duration.seconds(2)
        if let settle = reader.duration("join_settle", allowZero: true) {
            if settle > .seconds(60) {
                report(reader.path.key("join_settle"), "must be at most 60s")
            } else {
                joinSettle = settle
            }
        }
        let mqttToPusher = reader.choice("mqtt_to_pusher", ClusterMQTTToPusher.self) ?? .shared
        guard let group, let instance else { return nil }
        var settings = ClusterSettings(
            group: group, instance: instance, membershipTopic: membershipTopic, heartbeatInterval: heartbeatInterval,
            memberTimeout: memberTimeout, joinSettle: joinSettle)
        settings.mqttToPusher = mqttToPusher
        return settings
    }

    /// A required `[a-z0-9_-]+` name of at most 64 bytes.
    private func clusterName(_ reader: TableReader, _ key: String, what: String) -> String? {
        guard let name = reader.nonEmptyString(key, required: true) else { return nil }
        guard Self.isBridgeName(name) else {
            let hint = name.contains(".") ? " (for a host name, use the short one: systemd's %l, not %H)" : ""
            report(reader.path.key(key), "\"\(name)\" is not a valid \(what) name; use lower-case letters, digits, '_' and '-'\(hint)")
            return nil
        }
        guard name.utf8.count <= Self.maximumClusterNameLength else {
            report(reader.path.key(key), "is longer than \(Self.maximumClusterNameLength) bytes")
            return nil
        }
        return name
    }
}
