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

    public init(rule: String, channel: String, event: String, data: String, via: PusherDelivery) {
        self.rule = rule
        self.channel = channel
        self.event = event
        self.data = data
        self.via = via
    }
}
