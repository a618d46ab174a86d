import PusherProtocol

/// One `channel_prefix` as ``ChannelDiscovery`` sees it: a Pusher → MQTT rule or a presence
/// mirror that finds its channels by polling (docs/contract.md §7.1).
public struct DiscoveryRule: Sendable, Hashable {
    /// The rule's name, or ``PresenceMirrorRule/discoveryName`` for a mirror: the metric label `rule`.
    public var name: String
    /// The `channel_prefix`.
    public var prefix: String
    /// `discovery_interval`, `max_channels`, `idle_timeout`.
    public var settings: ChannelDiscoverySettings
    /// Whether this is a presence mirror (its rooms get retained members and counts).
    public var isPresenceMirror: Bool

    /// A prefix rule or mirror as the machine sees it.
    public init(
        name: String, prefix: String, settings: ChannelDiscoverySettings = ChannelDiscoverySettings(), isPresenceMirror: Bool = false
    ) {
        self.name = name
        self.prefix = prefix
        self.settings = settings
        self.isPresenceMirror = isPresenceMirror
    }

    /// Whether the channels under this prefix are presence channels: polled for `user_count`
    /// (distinct users, the bridge's own identity among them) instead of `subscription_count`.
    public var countsUsers: Bool { ChannelName(prefix).kind == .presence }

    /// The `info` attribute of the poll: `user_count` for `presence-` prefixes, else `subscription_count`.
    public var pollInfo: String { countsUsers ? "user_count" : "subscription_count" }

    /// Whether `channel` is under this prefix.
    public func takes(_ channel: String) -> Bool { ChannelDiscoverySettings.name(channel, isUnder: prefix) }
}

extension BridgeSettings {
    /// Every `channel_prefix` of the bridge, rules first (file order), then presence mirrors.
    public var discoveryRules: [DiscoveryRule] {
        pusherToMQTTRules.compactMap { rule in
            rule.discovery.map { DiscoveryRule(name: rule.name, prefix: rule.channel, settings: $0) }
        }
            + presence.compactMap { mirror in
                mirror.discovery.map {
                    DiscoveryRule(name: mirror.discoveryName, prefix: mirror.channel, settings: $0, isPresenceMirror: true)
                }
            }
    }
}

/// A channel listed by a poll (`GET /apps/ID/channels?filter_by_prefix=P&info=…`).
public struct OccupiedChannel: Sendable, Hashable {
    /// The channel name.
    public var name: String
    /// `subscription_count`, or `user_count` for presence prefixes; nil when the server reported none.
    public var count: Int?

    /// Channel `name` with its `count`, if reported.
    public init(_ name: String, count: Int? = nil) {
        self.name = name
        self.count = count
    }
}
