import PusherProtocol

/// One member of a presence channel as the Pusher client core reports it.
public struct PresenceMember: Sendable, Hashable {
    /// The member's id, normalised to a string (numeric ids arrive as numbers, docs/pusher-protocol.md §1).
    public var userID: String
    /// `user_info` as JSON text, `nil` when the member has none.
    public var infoJSON: String?

    public init(userID: String, infoJSON: String? = nil) {
        self.userID = userID
        self.infoJSON = infoJSON
    }
}

/// Mirrors one presence channel into retained MQTT messages (docs/contract.md §5.3), as a pure state machine.
///
/// For `[[bridge.presence]] channel = C, topic = T`:
/// - `T/members/<user_id>` (retained) = the member's `user_info` JSON, `{}` when none;
/// - `T/count` (retained) = the number of members, the bridge's own identity excluded;
/// - a member who leaves → a zero-length retained publish to `T/members/<user_id>` (deletes it).
///
/// The member list of `subscription_succeeded` is the truth on every (re)subscription: it is
/// published, and every retained `T/members/+` not in it is cleared — both those this mirror
/// published before a disconnect and *ghosts* found on the broker (left by an earlier run of the
/// daemon, or by members who left while the bridge was away). Ghosts are found through a
/// subscription to ``PresenceMirrorRule/retainedMembersFilter``: feed every message delivered
/// there **with the retain flag set** to ``retainedMessageFound(topic:payload:)``; it may arrive
/// before or after `subscription_succeeded`.
///
/// `<user_id>` is escaped per level (docs/contract.md §5.1), so `a/b` lives at `T/members/a%2Fb`.
/// Output is deterministic: members in ascending `user_id` order, clears after publishes, the
/// count last.
public struct PresenceMirror: Sendable {
    /// A command for the MQTT side.
    public enum Action: Sendable, Equatable {
        /// Publish `payload` retained to `topic`.
        case publishRetained(topic: String, payload: [UInt8], qos: Int)
        /// Publish a zero-length retained message to `topic`, which deletes the retained message there.
        case clearRetained(topic: String, qos: Int)
    }

    private enum Phase {
        /// No member list yet, or the Pusher connection dropped: events are not trusted until the
        /// next `subscription_succeeded` (presence state is rebuilt from scratch, docs/pusher-protocol.md §1).
        case awaitingMemberList
        /// Following the channel's member events.
        case live
    }

    /// The mirrored channel and topic.
    public let rule: PresenceMirrorRule
    /// The bridge's own presence identity, never listed.
    public let ownUserID: String?

    private var phase = Phase.awaitingMemberList
    /// Current members by escaped topic level.
    private var members: [String: PresenceMember] = [:]
    /// Levels this mirror has published and not cleared: what it believes is retained on the broker.
    private var published: Set<String> = []
    /// Retained levels found on the broker while waiting for the member list.
    private var foundOnBroker: Set<String> = []
    private let membersPrefix: String

    public init(rule: PresenceMirrorRule, ownUserID: String?) {
        self.rule = rule
        self.ownUserID = ownUserID
        self.membersPrefix = rule.topic + "/members/"
    }

    /// The members as currently mirrored, in `user_id` order.
    public var currentMembers: [PresenceMember] {
        members.values.sorted { $0.userID < $1.userID }
    }

    /// Whether the mirror follows a member list (after `subscription_succeeded`, until a disconnect).
    public var isLive: Bool { phase == .live }

    /// `pusher_internal:subscription_succeeded`: `list` replaces all state.
    public mutating func subscriptionSucceeded(members list: [PresenceMember]) -> [Action] {
        var next: [String: PresenceMember] = [:]
        for member in list where member.userID != ownUserID {
            next[TopicLevelEscaping.escape(member.userID)] = member
        }
        var actions: [Action] = []
        for (level, member) in next.sorted(by: { $0.value.userID < $1.value.userID }) {
            actions.append(publishMember(level: level, member))
        }
        let stale = published.union(foundOnBroker).subtracting(next.keys)
        for level in stale.sorted() {
            actions.append(.clearRetained(topic: membersPrefix + level, qos: rule.qos))
        }
        members = next
        published = Set(next.keys)
        foundOnBroker = []
        phase = .live
        actions.append(countAction())
        return actions
    }

    /// `pusher_internal:member_added`.
    public mutating func memberAdded(_ member: PresenceMember) -> [Action] {
        guard phase == .live, member.userID != ownUserID else { return [] }
        let level = TopicLevelEscaping.escape(member.userID)
        if let existing = members[level], existing == member { return [] }
        let isNew = members[level] == nil
        members[level] = member
        published.insert(level)
        var actions = [publishMember(level: level, member)]
        if isNew { actions.append(countAction()) }
        return actions
    }

    /// `pusher_internal:member_removed`.
    public mutating func memberRemoved(userID: String) -> [Action] {
        guard phase == .live, userID != ownUserID else { return [] }
        let level = TopicLevelEscaping.escape(userID)
        guard members.removeValue(forKey: level) != nil else { return [] }
        published.remove(level)
        return [.clearRetained(topic: membersPrefix + level, qos: rule.qos), countAction()]
    }

    /// A retained message on `T/members/+`. While live, one for a non-member is a ghost and is
    /// cleared at once; before the member list arrives it is remembered and judged then.
    /// Zero-length payloads are deletions and are ignored; topics outside `T/members/+` too.
    public mutating func retainedMessageFound(topic: String, payload: [UInt8]) -> [Action] {
        // Bytes, as the broker sees the topic (MQTTTopicText): a combining mark after the last
        // `/` must not hide the prefix.
        guard topic.hasUTF8Prefix(membersPrefix) else { return [] }
        let rest = topic.utf8.dropFirst(membersPrefix.utf8.count)
        guard !rest.isEmpty, !rest.contains(UInt8(ascii: "/")) else { return [] }
        let level = String(Substring(rest))
        guard !payload.isEmpty else {
            foundOnBroker.remove(level)
            return []
        }
        switch phase {
        case .awaitingMemberList:
            foundOnBroker.insert(level)
            return []
        case .live:
            guard members[level] == nil else { return [] }
            published.remove(level)
            return [.clearRetained(topic: topic, qos: rule.qos)]
        }
    }

    /// The Pusher connection dropped (or the channel was unsubscribed): member events are lost
    /// until the next `subscription_succeeded`, which will clear whoever left meanwhile.
    public mutating func pusherDisconnected() -> [Action] {
        phase = .awaitingMemberList
        return []
    }

    /// The MQTT connection came (back) up. The broker may have lost retained messages (restart
    /// without persistence), so a live mirror republishes its whole state; publishing the same
    /// retained message again is harmless.
    public mutating func mqttConnected() -> [Action] {
        guard phase == .live else { return [] }
        var actions = members.sorted(by: { $0.value.userID < $1.value.userID }).map { publishMember(level: $0.key, $0.value) }
        actions.append(countAction())
        return actions
    }

    /// The mirror is removed from the config: clear everything it published, and the count.
    public mutating func retire() -> [Action] {
        var actions = published.union(members.keys).sorted().map { Action.clearRetained(topic: membersPrefix + $0, qos: rule.qos) }
        actions.append(.clearRetained(topic: rule.topic + "/count", qos: rule.qos))
        members = [:]
        published = []
        foundOnBroker = []
        phase = .awaitingMemberList
        return actions
    }

    private func publishMember(level: String, _ member: PresenceMember) -> Action {
        let info = member.infoJSON.flatMap { $0.isEmpty || $0 == "null" ? nil : $0 } ?? "{}"
        return .publishRetained(topic: membersPrefix + level, payload: Array(info.utf8), qos: rule.qos)
    }

    private func countAction() -> Action {
        .publishRetained(topic: rule.topic + "/count", payload: Array(String(members.count).utf8), qos: rule.qos)
    }
}
