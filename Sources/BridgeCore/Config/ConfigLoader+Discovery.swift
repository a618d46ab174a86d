import PusherProtocol

/// `channel` or `channel_prefix` with its keys (docs/contract.md §7.1), for Pusher → MQTT rules
/// and presence mirrors.
extension LoadContext {
    /// The keys that only apply next to `channel_prefix`.
    static let discoveryKeys = ["discovery_interval", "max_channels", "idle_timeout"]

    /// What a rule or mirror subscribes: one exact channel, or the channels under a prefix.
    struct ChannelSelection {
        /// The exact channel, or the prefix.
        var name: String
        /// Set for a prefix.
        var discovery: ChannelDiscoverySettings?
    }

    /// Reads `channel` or `channel_prefix` (exactly one) and, with a prefix, `discovery_interval`,
    /// `max_channels` and `idle_timeout`. Exact channels are checked by the caller; the prefix is
    /// checked here against Pusher's channel-name rules. Nil when invalid (reported).
    func readChannelSelection(_ reader: TableReader, presence: Bool) -> ChannelSelection? {
        let hasPrefix = reader.has("channel_prefix")
        guard hasPrefix else {
            for key in Self.discoveryKeys where reader.has(key) {
                report(reader.path.key(key), "only applies with channel_prefix")
            }
            guard let channel = reader.nonEmptyString("channel", required: true) else { return nil }
            return Self.discoveryKeys.contains(where: reader.has) ? nil : ChannelSelection(name: channel)
        }
        if reader.has("channel") {
            report(reader.path.key("channel_prefix"), "give either channel or channel_prefix, not both")
            return nil
        }
        var valid = true
        let prefix = reader.nonEmptyString("channel_prefix")
        if let prefix, let problem = Self.channelPrefixProblem(prefix, presence: presence) {
            report(reader.path.key("channel_prefix"), problem)
            valid = false
        }
        var settings = ChannelDiscoverySettings()
        if reader.has("discovery_interval") {
            if let interval = reader.duration("discovery_interval", minimum: ChannelDiscoverySettings.minimumInterval) {
                settings.interval = interval
            } else {
                valid = false
            }
        }
        if reader.has("max_channels") {
            if let maxChannels = reader.int("max_channels", in: 1...1_000_000) { settings.maxChannels = maxChannels } else { valid = false }
        }
        if reader.has("idle_timeout") {
            if let timeout = reader.duration("idle_timeout", minimum: .seconds(1)) { settings.idleTimeout = timeout } else { valid = false }
        }
        guard valid, let prefix else { return nil }
        return ChannelSelection(name: prefix, discovery: settings)
    }

    /// Why `prefix` cannot be a `channel_prefix`, or nil: it must be a valid start of a channel
    /// name that leaves room for at least one more character, decide the channel kind (not a
    /// part of `private-` or `presence-`), and for presence mirrors start with `presence-`.
    static func channelPrefixProblem(_ prefix: String, presence: Bool) -> String? {
        for byte in prefix.utf8 where !ChannelName.isChannelNameByte(byte) {
            let shown = byte < 0x80 ? String(UnicodeScalar(byte)) : "non-ASCII"
            return "'\(shown)' can never appear in a channel name; allowed are A-Z a-z 0-9 _ - = @ , . ;"
        }
        if prefix.utf8.count >= PusherLimits.channelNameLength {
            return
                "is \(prefix.utf8.count) characters; channel names have at most \(PusherLimits.channelNameLength), "
                + "so nothing could follow it"
        }
        for kindPrefix in ["private-", "presence-", "private-encrypted-"]
        where kindPrefix.utf8.count > prefix.utf8.count && kindPrefix.hasUTF8Prefix(prefix) && prefix != "private-" {
            return "\"\(prefix)\" would take channels of different kinds; write out at least \"\(kindPrefix)\""
        }
        if presence, !prefix.hasUTF8Prefix("presence-") {
            return "\"\(prefix)\" does not start with \"presence-\"; presence mirrors take presence channels only"
        }
        return nil
    }

    /// The topic of a prefix presence mirror: `{suffix}` exactly once, as a whole level, and no
    /// other placeholder. Nil when fine.
    static func presencePrefixTopicProblem(_ topic: String) -> String? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        let placeholder = PresenceMirrorRule.suffixPlaceholder
        let whole = levels.filter { $0 == placeholder }.count
        if whole != 1 || levels.contains(where: { $0 != placeholder && $0.contains("{") }) {
            return "a presence mirror with channel_prefix needs {suffix} once, as a whole topic level (e.g. \"dash/rooms/{suffix}\"),"
                + " and no other placeholder"
        }
        return nil
    }
}
