import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// A `[[bridge.presence]]`: members of a presence channel → retained MQTT messages (docs/contract.md §5.3),
/// or, with a `channel_prefix`, of every room found under it, each under its own topic (§7.1).
public struct PresenceMirrorRule: Sendable, Equatable {
    /// A `presence-` channel; with ``discovery``, the `channel_prefix`.
    public var channel: String
    /// The base topic `T`: members go to `T/members/<user_id>`, the count to `T/count`. With a
    /// prefix, `{suffix}` (one whole level) stands for the room's name after the prefix.
    public var topic: String
    /// Publish QoS, default 1.
    public var qos: Int
    /// `channel_prefix` and its keys; nil for one exact channel.
    public var discovery: ChannelDiscoverySettings?

    /// `{suffix}` as written in a prefix mirror's topic.
    public static let suffixPlaceholder = "{suffix}"

    /// A mirror of `channel` (with `discovery`: of every room under the prefix `channel`) under `topic`.
    public init(channel: String, topic: String, qos: Int = 1, discovery: ChannelDiscoverySettings? = nil) {
        self.channel = channel
        self.topic = topic
        self.qos = qos
        self.discovery = discovery
    }

    /// The `channel_prefix`, or nil for a mirror of one exact channel.
    public var channelPrefix: String? { discovery == nil ? nil : channel }

    /// The discovery rule name of a prefix mirror (metric label `rule`, logs): `presence:<prefix>`.
    public var discoveryName: String { "presence:" + channel }

    /// `T/members/+` (`T` with `{suffix}` as `+` for a prefix mirror): where retained members (and ghosts) are found.
    public var retainedMembersFilter: String {
        let base = discovery == nil ? topic : topic.replacing(Self.suffixPlaceholder, with: "+")
        return base + "/members/+"
    }

    /// The mirror of one room found under this prefix mirror: channel `room`, topic with
    /// `{suffix}` filled in, escaped like any topic value (docs/contract.md §5.1). Nil when this
    /// is not a prefix mirror or `room` is not under its prefix.
    public func room(_ room: String) -> PresenceMirrorRule? {
        guard discovery != nil, let suffix = ChannelDiscoverySettings.suffix(of: room, under: channel) else { return nil }
        var escaped = ""
        TopicLevelEscaping.append(suffix, to: &escaped)
        return PresenceMirrorRule(channel: room, topic: topic.replacing(Self.suffixPlaceholder, with: escaped), qos: qos)
    }
}
