import PusherProtocol

/// Presence rooms found under a `channel_prefix` (docs/contract.md §7.1): each gets its own
/// ``PresenceMirror`` while the bridge holds it, under the prefix mirror's topic with `{suffix}`
/// filled in (§5.3).
struct DiscoveredRooms: Sendable {
    /// Room channel by the base topic `T` of its mirror.
    var channelByTopic: [String: String] = [:]
    /// Retained `T/members/<id>` found under a prefix mirror's filter for rooms not held (yet),
    /// by base topic: handed to the room's mirror when it is joined, so ghosts of an earlier run are cleared.
    var pendingFound: [String: Set<String>] = [:]

    /// `T` of a topic `T/members/<level>`, or nil.
    static func baseTopic(ofMember topic: String) -> Substring? {
        let utf8 = topic.utf8
        guard let slash = utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        let head = Substring(utf8[..<slash])
        guard head.hasSuffix("/members") else { return nil }
        return head.dropLast("/members".count)
    }
}

extension BridgeStateMachine {
    /// Discovery took presence room `channel` for a prefix mirror: start mirroring it (its
    /// members arrive with `subscription_succeeded`). Retained members found earlier under the
    /// room's topic are handed over, so that ghosts are cleared then.
    public mutating func discoveredRoomJoined(_ channel: String, receivedAtMillis: Int64) -> [Action] {
        guard mirrors[channel] == nil, let rule = settings.presence.lazy.compactMap({ $0.room(channel) }).first else { return [] }
        var mirror = PresenceMirror(rule: rule, ownUserID: settings.ownPresenceUserID)
        var actions: [Action] = []
        for topic in (rooms.pendingFound.removeValue(forKey: rule.topic) ?? []).sorted() {
            perform(mirror.retainedMessageFound(topic: topic, payload: [1]), receivedAtMillis: receivedAtMillis, into: &actions)
        }
        mirrors[channel] = mirror
        rooms.channelByTopic[rule.topic] = channel
        return actions
    }

    /// This bridge unsubscribed `channel` while it stays configured (in a cluster another member
    /// holds it now, docs/contract.md §7.4): a presence mirror of it stops trusting its member
    /// list, publishes nothing after an MQTT reconnect, and starts over from the member list of
    /// its next subscription — the holder's mirror is the one that publishes.
    public mutating func channelReleased(_ channel: String, receivedAtMillis: Int64) -> [Action] {
        guard mirrors[channel] != nil else { return [] }
        var actions: [Action] = []
        withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) { $0.pusherDisconnected() }
        return actions
    }

    /// Discovery left presence room `channel`: clear its retained members and count (§5.3,
    /// §7.1). A configured exact mirror is not touched.
    public mutating func discoveredRoomLeft(_ channel: String, receivedAtMillis: Int64) -> [Action] {
        guard let mirror = mirrors[channel], rooms.channelByTopic[mirror.rule.topic] == channel else { return [] }
        var actions: [Action] = []
        withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) { $0.retire() }
        mirrors[channel] = nil
        rooms.channelByTopic[mirror.rule.topic] = nil
        return actions
    }

    /// A poll of the prefix mirror with `prefix` listed `occupied`: retained members found for a
    /// room nobody is in and the bridge does not hold (ghosts of an earlier run in a room that
    /// stays empty) are cleared, with the room's count. Rooms that are occupied keep theirs until
    /// joined, when their member list decides.
    public mutating func discoveredRoomsPolled(prefix: String, occupied: Set<String>, receivedAtMillis: Int64) -> [Action] {
        guard !rooms.pendingFound.isEmpty,
            let mirror = settings.presence.first(where: { $0.discovery != nil && $0.channel == prefix })
        else { return [] }
        let levels = mirror.topic.split(separator: "/", omittingEmptySubsequences: false)
        guard let index = levels.firstIndex(of: Substring(PresenceMirrorRule.suffixPlaceholder)) else { return [] }
        var commands: [PresenceMirror.Action] = []
        for (base, topics) in rooms.pendingFound.sorted(by: { $0.key < $1.key }) {
            let found = base.split(separator: "/", omittingEmptySubsequences: false)
            guard found.count == levels.count,
                zip(levels, found).enumerated().allSatisfy({ $0.offset == index || $0.element.0 == $0.element.1 }),
                let suffix = TopicLevelEscaping.unescape(found[index]), !suffix.isEmpty
            else { continue }
            let room = prefix + suffix
            guard !occupied.contains(room), mirrors[room] == nil else { continue }
            for topic in topics.sorted() { commands.append(.clearRetained(topic: topic, qos: mirror.qos)) }
            commands.append(.clearRetained(topic: base + "/count", qos: mirror.qos))
            rooms.pendingFound[base] = nil
        }
        var actions: [Action] = []
        perform(commands, receivedAtMillis: receivedAtMillis, into: &actions)
        return actions
    }

    /// Whether `channel` is a room mirrored through a prefix mirror.
    public func isDiscoveredRoom(_ channel: String) -> Bool {
        mirrors[channel].map { rooms.channelByTopic[$0.rule.topic] == channel } ?? false
    }

    /// A message on a presence mirror's `T/members/+` (exact or prefix): handed to its mirror, or
    /// for a room not held, remembered. Returns false for every other topic.
    mutating func presenceMemberTopicFound(topic: String, payload: [UInt8], receivedAtMillis: Int64, into actions: inout [Action]) -> Bool {
        for rule in settings.presence where rule.discovery == nil && topic.hasUTF8Prefix(rule.topic + "/members/") {
            withMirror(rule.channel, receivedAtMillis: receivedAtMillis, into: &actions) {
                $0.retainedMessageFound(topic: topic, payload: payload)
            }
            return true
        }
        guard settings.presence.contains(where: { $0.discovery != nil }), let base = DiscoveredRooms.baseTopic(ofMember: topic) else {
            return false
        }
        if let channel = rooms.channelByTopic[String(base)] {
            withMirror(channel, receivedAtMillis: receivedAtMillis, into: &actions) {
                $0.retainedMessageFound(topic: topic, payload: payload)
            }
            return true
        }
        for rule in settings.presence where rule.discovery != nil {
            guard case .success(let filter) = TopicFilter.parse(rule.retainedMembersFilter), filter.match(topic) != nil else { continue }
            if payload.isEmpty {
                rooms.pendingFound[String(base)]?.remove(topic)
                if rooms.pendingFound[String(base)]?.isEmpty == true { rooms.pendingFound[String(base)] = nil }
            } else {
                rooms.pendingFound[String(base), default: []].insert(topic)
            }
            return true
        }
        return false
    }

    /// The room mirrors that a reload to `new` keeps: those whose prefix mirror is unchanged.
    mutating func takeKeptRooms(for new: BridgeSettings) -> [String: PresenceMirror] {
        var kept: [String: PresenceMirror] = [:]
        for channel in rooms.channelByTopic.values {
            guard let mirror = mirrors[channel], new.presence.contains(where: { $0.room(channel) == mirror.rule }) else { continue }
            kept[channel] = mirrors.removeValue(forKey: channel)
        }
        rooms.channelByTopic = rooms.channelByTopic.filter { kept[$0.value] != nil }
        if !new.presence.contains(where: { $0.discovery != nil }) { rooms.pendingFound = [:] }
        return kept
    }
}
