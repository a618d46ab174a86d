import MQTTVocabulary

/// A message to publish to MQTT, produced by a Pusher → MQTT rule.
public struct MQTTPublish: Sendable, Equatable {
    /// The rule that produced it.
    public var rule: String
    /// The rendered, escaped topic.
    public var topic: String
    /// The payload bytes.
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// `pusher-channel`, `pusher-event`, `pusher-user-id` — only when the bridge speaks MQTT 5.
    public var userProperties: [MQTTUserProperty]

    public init(rule: String, topic: String, payload: [UInt8], qos: Int, retain: Bool, userProperties: [MQTTUserProperty] = []) {
        self.rule = rule
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.userProperties = userProperties
    }
}
