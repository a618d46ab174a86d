import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

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
