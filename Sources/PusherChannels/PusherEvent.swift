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
