import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// What an MQTT → Pusher rule sends to (docs/contract.md §8.2).
public enum PusherTarget: String, Sendable, Equatable {
    /// `channel`: an event on a channel.
    case channel
    /// `to_user`: an event to every signed-in connection of a user (`#server-to-user-<id>`).
    case user = "to_user"
    /// `terminate_user`: close every connection of a user (the payload is ignored).
    case terminateUser = "terminate_user"
}

/// A `from = "mqtt"` rule: messages matching a filter → a Pusher channel and event (or a user's
/// connections, or their termination).
public struct MQTTToPusherRule: Sendable, Equatable {
    public var name: String
    public var filter: TopicFilter
    /// What `channel` renders: a channel name, or a user id (`to_user`, `terminate_user`).
    public var target: PusherTarget = .channel
    /// The template of `channel`, `to_user` or `terminate_user` (see ``target``).
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
