import PusherProtocol

/// Webhook counters of one app (control endpoint `GET /pusher-local/apps/ID/stats`).
public struct WebhookCounters: Sendable, Equatable {
    /// Requests the receiver answered with 2xx.
    public var posted = 0
    /// Events in those requests.
    public var eventsPosted = 0
    /// Attempts that failed (network error or non-2xx).
    public var failed = 0
    /// Attempts that repeated a failed request.
    public var retried = 0
    /// Requests dropped after failing until the retry limit.
    public var givenUp = 0
    /// Events in those requests.
    public var eventsGivenUp = 0
    /// Events dropped because the queue behind a retrying request was full.
    public var eventsDropped = 0

    /// Counters from their parts (all zero by default).
    public init() {}
}
