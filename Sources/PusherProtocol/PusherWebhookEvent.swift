/// One event of a webhook request (docs/pusher-protocol.md §2, "Webhooks"), as Pusher names its
/// fields: what pusher-local posts and what the bridge receives (docs/contract.md §7.2).
public struct PusherWebhookEvent: Sendable, Equatable {
    /// `name`: `channel_occupied`, `channel_vacated`, `member_added`, `member_removed`,
    /// `client_event`, `cache_miss`, `subscription_count`, or a name this version does not know.
    public var name: String
    /// `channel`.
    public var channel: String
    /// `user_id` (`member_added`, `member_removed`, and `client_event` on presence channels).
    public var userID: String?
    /// `event`: the client event's name (`client_event`).
    public var event: String?
    /// `data`: the client event's data (`client_event`), a string; another JSON value is kept as its text.
    public var data: String?
    /// `socket_id`: the sender of a client event.
    public var socketID: String?
    /// `subscription_count` (`subscription_count`).
    public var subscriptionCount: Int?

    /// An event from its parts.
    public init(
        name: String, channel: String, userID: String? = nil, event: String? = nil, data: String? = nil, socketID: String? = nil,
        subscriptionCount: Int? = nil
    ) {
        self.name = name
        self.channel = channel
        self.userID = userID
        self.event = event
        self.data = data
        self.socketID = socketID
        self.subscriptionCount = subscriptionCount
    }
}
