import MQTTVocabulary
import PusherProtocol

/// `payload = "data" | "envelope" | "json:/pointer"` (docs/contract.md §5.1, §7.3).
public enum PayloadMode: Sendable, Equatable, CustomStringConvertible {
    /// The message body as is.
    case data
    /// A JSON object describing the message.
    case envelope
    /// Only the value at this pointer: a string as its content, anything else as its JSON text
    /// (a message without it is dead-lettered).
    case projection(JSONPointer)

    /// The pointer of a `json:` projection.
    public var projectionPointer: JSONPointer? {
        if case .projection(let pointer) = self { pointer } else { nil }
    }

    /// The value as written in `bridges.conf`.
    public var description: String {
        switch self {
        case .data: "data"
        case .envelope: "envelope"
        case .projection(let pointer): "json:" + pointer.source
        }
    }
}

/// `where`, `throttle` and `on_change` of a rule (docs/contract.md §7.3): which messages it
/// forwards, and how often per target.
public struct PayloadConditions: Sendable, Equatable {
    /// Forward only messages whose payload matches (`where`); nil forwards all.
    public var condition: WhereExpression?
    /// At most one message per target per interval, the latest (`throttle`); nil is off.
    public var throttle: Duration?
    /// Drop a message equal to the last one forwarded for its target (`on_change`).
    public var onChange: Bool
    /// How many targets the rule remembers for `throttle`/`on_change` (`max_targets`).
    public var maxTargets: Int

    /// Nothing filtered, nothing shaped.
    public static let none = PayloadConditions()

    public init(condition: WhereExpression? = nil, throttle: Duration? = nil, onChange: Bool = false, maxTargets: Int = 10_000) {
        self.condition = condition
        self.throttle = throttle
        self.onChange = onChange
        self.maxTargets = maxTargets
    }

    /// Whether `throttle` or `on_change` is set.
    public var shapesRate: Bool { throttle != nil || onChange }
}

/// `via` of an MQTT → Pusher rule.
public enum PusherDelivery: String, Sendable, Equatable, CaseIterable {
    /// Signed HTTP API call (`POST /apps/ID/events`), default.
    case http
    /// A `client-*` event on the bridge's WebSocket (private-/presence- channels only).
    case clientEvent = "client-event"
}

/// One `[[bridge.rule]]`.
public enum BridgeRule: Sendable, Equatable {
    /// `from = "pusher"`.
    case pusherToMQTT(PusherToMQTTRule)
    /// `from = "mqtt"`.
    case mqttToPusher(MQTTToPusherRule)

    /// `where`, `throttle`, `on_change` of the rule.
    public var conditions: PayloadConditions {
        switch self {
        case .pusherToMQTT(let rule): rule.conditions
        case .mqttToPusher(let rule): rule.conditions
        }
    }

    /// The rule's name.
    public var name: String {
        switch self {
        case .pusherToMQTT(let rule): rule.name
        case .mqttToPusher(let rule): rule.name
        }
    }
}

/// Which events of a channel a Pusher → MQTT rule takes.
public enum EventSelection: Sendable, Equatable {
    /// `["*"]`: every event except `pusher:*` / `pusher_internal:*`.
    case all
    /// Exactly these names.
    case named([String])

    /// Whether `event` is selected. Protocol events never are.
    public func contains(_ event: String) -> Bool {
        switch self {
        case .all: true
        case .named(let names): names.contains(event)
        }
    }
}

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

/// `channel_prefix` with `discovery_interval`, `max_channels` and `idle_timeout`
/// (docs/contract.md §7.1): how a rule or presence mirror finds its channels.
public struct ChannelDiscoverySettings: Sendable, Hashable {
    /// `discovery_interval`: how often the prefix is polled (default 30 s, at least 5 s).
    public var interval: Duration
    /// `max_channels`: how many channels the rule holds at most (default 1000).
    public var maxChannels: Int
    /// `idle_timeout`: a channel without counts and without events this long is left (default 10 min).
    public var idleTimeout: Duration

    /// The smallest `discovery_interval`.
    public static let minimumInterval: Duration = .seconds(5)

    /// The settings, defaults as in docs/contract.md §7.1.
    public init(interval: Duration = .seconds(30), maxChannels: Int = 1000, idleTimeout: Duration = .seconds(600)) {
        self.interval = interval
        self.maxChannels = maxChannels
        self.idleTimeout = idleTimeout
    }

    /// Whether `name` is a channel under `prefix`: it starts with it (bytes) and is longer.
    public static func name(_ name: String, isUnder prefix: String) -> Bool {
        name.utf8.count > prefix.utf8.count && name.hasUTF8Prefix(prefix)
    }

    /// `{suffix}`: `name` minus `prefix` (nil when `name` is not under it).
    public static func suffix(of name: String, under prefix: String) -> Substring? {
        guard Self.name(name, isUnder: prefix) else { return nil }
        return Substring(name.utf8.dropFirst(prefix.utf8.count))
    }
}
