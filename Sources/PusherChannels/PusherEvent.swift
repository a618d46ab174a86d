import PusherProtocol

/// An event received on a channel (or, rarely, without one), as the application sees it.
public struct PusherEvent: Sendable, Hashable {
    /// The event name, e.g. `new-price` or `client-typing`.
    public var name: String
    /// The channel it arrived on; `nil` for connection-wide events.
    public var channel: String?
    /// The event's data exactly as received (docs/pusher-protocol.md §1 "Double encoding": the inner
    /// string, not re-encoded); for `private-encrypted-` channels the decrypted plaintext.
    public var data: String?
    /// The sender's user id, for client events on presence channels (normalised to a string).
    public var userID: String?

    /// An event from its parts.
    public init(name: String, channel: String?, data: String?, userID: String? = nil) {
        self.name = name
        self.channel = channel
        self.data = data
        self.userID = userID
    }

    /// Whether this is a protocol event (`pusher:…`, e.g. `pusher:cache_miss`) rather than an
    /// application event.
    public var isProtocolEvent: Bool { EventName.isProtocolEvent(name) }

    /// For `pusher:subscription_count` (the server's `pusher_internal:subscription_count`): the
    /// channel's connection count from data `{"subscription_count":N}`; nil for other events or
    /// data without a whole, non-negative count.
    public var subscriptionCount: Int? {
        guard name == "pusher:subscription_count", let data, let members = try? JSONScanner.object(data),
            let text = members["subscription_count"]?.stringOrNumber, let count = Int(text), count >= 0
        else { return nil }
        return count
    }
}

/// A member of a presence channel.
public struct PusherMember: Sendable, Hashable {
    /// The member's `user_id`, normalised to a string (servers may send numbers).
    public var userID: String
    /// The member's `user_info` as raw JSON text; `nil` when the server sent none.
    public var userInfo: String?

    /// A member from its parts.
    public init(userID: String, userInfo: String? = nil) {
        self.userID = userID
        self.userInfo = userInfo
    }
}

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

/// The connection states PusherSwift users know.
public enum PusherConnectionState: String, Sendable, Hashable, CustomStringConvertible {
    /// Opening the WebSocket and waiting for `pusher:connection_established`.
    case connecting
    /// Established: a `socket_id` is known and subscriptions are (re)sent.
    case connected
    /// Closing at the application's request.
    case disconnecting
    /// Not connected and not trying to (initial state, after `disconnect()`, or after giving up).
    case disconnected
    /// Lost the connection; waiting for the backoff delay before the next attempt.
    case reconnecting

    public var description: String { rawValue }
}

/// A connection state transition, with the `socket_id` when connected.
public struct PusherConnectionStateChange: Sendable, Hashable {
    /// The state before.
    public var previous: PusherConnectionState
    /// The state now.
    public var current: PusherConnectionState
    /// The socket id of the new connection when `current == .connected`.
    public var socketID: String?

    /// A transition from its parts.
    public init(previous: PusherConnectionState, current: PusherConnectionState, socketID: String? = nil) {
        self.previous = previous
        self.current = current
        self.socketID = socketID
    }
}

/// Everything the client reports, in one ordered stream (see ``PusherClient/updates()``).
public enum PusherUpdate: Sendable, Hashable {
    /// An event on a channel (application events, client events, `pusher:cache_miss`,
    /// `pusher:subscription_count`).
    case event(PusherEvent)
    /// A presence member list change.
    case presence(PusherPresenceChange)
    /// A channel's subscription succeeded (for presence also reported as ``presence(_:)``).
    case subscriptionSucceeded(channel: String)
    /// A channel's subscription failed (auth refused, `pusher:subscription_error`, …).
    case subscriptionFailed(channel: String, error: PusherError)
    /// The connection changed state.
    case connectionStateChanged(PusherConnectionStateChange)
    /// An error not tied to one channel's subscription (`pusher:error`, refused connection, …).
    case error(PusherError)
}
