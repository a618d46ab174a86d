/// An event to publish into Pusher, produced by an MQTT → Pusher rule.
public struct PusherEventPublish: Sendable, Equatable {
    /// The rule that produced it.
    public var rule: String
    /// The rendered, validated channel name.
    public var channel: String
    /// The rendered, validated event name.
    public var event: String
    /// The event's `data` (docs/contract.md §5.1), at most `max_event_bytes`.
    public var data: String
    /// HTTP API or client event.
    public var via: PusherDelivery

    /// The event name of a `terminate_user` message: not an event but `POST
    /// /apps/ID/users/<id>/terminate_connections` for the user of `#server-to-user-<id>` in
    /// ``channel``. A `pusher_internal:` name, which no rule may render, so it cannot be mistaken.
    public static let terminateUserEvent = "pusher_internal:terminate_connections"

    /// Whether this message terminates the connections of a user rather than sending an event.
    public var terminatesUser: Bool { event == Self.terminateUserEvent }

    public init(rule: String, channel: String, event: String, data: String, via: PusherDelivery) {
        self.rule = rule
        self.channel = channel
        self.event = event
        self.data = data
        self.via = via
    }
}
