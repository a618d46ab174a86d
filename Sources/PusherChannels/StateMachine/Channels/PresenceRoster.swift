/// The members of one presence channel and our own entry (docs/pusher-protocol.md §1 "Presence").
///
/// Every `subscription_succeeded` *replaces* the list: appending duplicates members after a
/// reconnect (PusherSwift #370). `member_added` for a known id updates it in place;
/// `member_removed` for an unknown id changes nothing. The list is empty while not subscribed.
struct PresenceRoster: Sendable, Equatable {
    /// The members, in the server's order, then in order of arrival.
    private(set) var members: [PusherMember] = []
    /// Our own entry, from the `channel_data` we subscribed with.
    private(set) var me: PusherMember?

    /// `pusher_internal:subscription_succeeded` on `channel` with `data`; we subscribed with `channelData`.
    mutating func subscriptionSucceeded(
        channel: String,
        data: String?,
        channelData: String?
    ) -> [PusherConnectionStateMachine.Action] {
        var actions: [PusherConnectionStateMachine.Action] = []
        // The list replaces local state: appending duplicates members after a reconnect
        // (PusherSwift #370, docs/pusher-protocol.md §1 "Presence").
        switch ProtocolEventData.presenceMembers(from: data) {
        case .success(let members):
            self.members = members
        case .failure(let reason):
            self.members = []
            actions.append(.ignoredFrame(event: "pusher_internal:subscription_succeeded", reason: reason.reason))
        }
        me = ProtocolEventData.me(channelData: channelData, members: members)
        actions.append(.presence(.subscriptionSucceeded(channel: channel, members: members, me: me)))
        return actions
    }

    /// `pusher_internal:member_added` on `channel` with `data`.
    mutating func memberAdded(channel: String, data: String?) -> [PusherConnectionStateMachine.Action] {
        guard let member = ProtocolEventData.member(from: data) else {
            return [.ignoredFrame(event: "pusher_internal:member_added", reason: "member_added without user_id")]
        }
        if let index = members.firstIndex(where: { $0.userID == member.userID }) {
            members[index] = member
            return []
        }
        members.append(member)
        return [.presence(.memberAdded(channel: channel, member: member))]
    }

    /// `pusher_internal:member_removed` on `channel` with `data`.
    mutating func memberRemoved(channel: String, data: String?) -> [PusherConnectionStateMachine.Action] {
        guard let gone = ProtocolEventData.member(from: data) else {
            return [.ignoredFrame(event: "pusher_internal:member_removed", reason: "member_removed without user_id")]
        }
        guard let index = members.firstIndex(where: { $0.userID == gone.userID }) else { return [] }
        let member = members.remove(at: index)
        return [.presence(.memberRemoved(channel: channel, member: member))]
    }

    /// The connection ended: the server will send the whole list again after resubscribing.
    mutating func connectionLost() {
        members = []
        me = nil
    }
}
