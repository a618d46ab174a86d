import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// A `from = "mqtt"` rule: messages matching a filter → a Pusher channel and event.
public struct MQTTToPusherRule: Sendable, Equatable {
    public var name: String
    public var filter: TopicFilter
    public var channel: NameTemplate
    public var event: NameTemplate
    /// Subscription QoS, default 1.
    public var qos: Int
    /// Whether retained messages are forwarded (default false).
    public var forwardRetained: Bool
    public var payload: PayloadMode
    public var via: PusherDelivery
    /// `where`, `throttle`, `on_change`.
    public var conditions: PayloadConditions

    /// Whether routing a message reads its payload as JSON (`where`, `{json:…}`, `json:` projection).
    public var readsPayload: Bool {
        conditions.condition != nil || channel.readsPayload || event.readsPayload
            || { if case .projection = payload { true } else { false } }()
    }

    public init(
        name: String, filter: TopicFilter, channel: NameTemplate, event: NameTemplate, qos: Int = 1, forwardRetained: Bool = false,
        payload: PayloadMode = .data, via: PusherDelivery = .http, conditions: PayloadConditions = .none
    ) {
        self.conditions = conditions
        self.name = name
        self.filter = filter
        self.channel = channel
        self.event = event
        self.qos = qos
        self.forwardRetained = forwardRetained
        self.payload = payload
        self.via = via
    }
}
