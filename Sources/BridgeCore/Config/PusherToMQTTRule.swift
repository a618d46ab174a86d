import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// A `from = "pusher"` rule: events of one channel, or of the channels found under a prefix
/// (docs/contract.md §7.1), → an MQTT topic.
public struct PusherToMQTTRule: Sendable, Equatable {
    public var name: String
    /// An exact channel name (Pusher has no wildcard subscriptions); with ``discovery``, the
    /// `channel_prefix` instead.
    public var channel: String
    /// `channel_prefix` and its keys: set when ``channel`` is a prefix whose channels are found by
    /// polling (docs/contract.md §7.1); nil for an exact channel.
    public var discovery: ChannelDiscoverySettings?
    public var events: EventSelection
    /// Rendered with per-level escaping.
    public var topic: NameTemplate
    /// Publish QoS, default 1.
    public var qos: Int
    /// Publish retained, default false.
    public var retain: Bool
    public var payload: PayloadMode
    /// `where`, `throttle`, `on_change`.
    public var conditions: PayloadConditions

    /// Whether routing an event reads its data as JSON (`where`, `{json:…}`, `json:` projection).
    public var readsPayload: Bool {
        conditions.condition != nil || topic.readsPayload || { if case .projection = payload { true } else { false } }()
    }

    /// The `channel_prefix`, or nil for a rule with an exact `channel`.
    public var channelPrefix: String? { discovery == nil ? nil : channel }

    /// Whether events on `name` go through this rule: the exact channel, or any channel longer
    /// than the prefix that starts with it.
    public func takes(channel name: String) -> Bool {
        discovery == nil ? name == channel : ChannelDiscoverySettings.name(name, isUnder: channel)
    }

    public init(
        name: String, channel: String, events: EventSelection = .all, topic: NameTemplate, qos: Int = 1, retain: Bool = false,
        payload: PayloadMode = .data, conditions: PayloadConditions = .none, discovery: ChannelDiscoverySettings? = nil
    ) {
        self.conditions = conditions
        self.name = name
        self.channel = channel
        self.discovery = discovery
        self.events = events
        self.topic = topic
        self.qos = qos
        self.retain = retain
        self.payload = payload
    }
}
