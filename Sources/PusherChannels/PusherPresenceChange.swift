import PusherProtocol

/// A change of a presence channel's member list (docs/pusher-protocol.md §1 "Presence").
public enum PusherPresenceChange: Sendable, Hashable {
    /// Subscribed: `members` is the complete list and *replaces* any earlier state.
    case subscriptionSucceeded(channel: String, members: [PusherMember], me: PusherMember?)
    /// A user joined (one per user, however many connections it has).
    case memberAdded(channel: String, member: PusherMember)
    /// A user left.
    case memberRemoved(channel: String, member: PusherMember)

    /// The presence channel this change belongs to.
    public var channel: String {
        switch self {
        case .subscriptionSucceeded(let channel, _, _), .memberAdded(let channel, _), .memberRemoved(let channel, _):
            channel
        }
    }
}
