import DequeModule
import PusherProtocol

/// At most `limit` client events in any `window` (docs/pusher-protocol.md §1 "Client events": 10 per
/// second per connection; the server closes or rejects with 4301 beyond), refused locally
/// before the server would.
struct ClientEventRateLimiter: Sendable {
    /// Most events admitted within one window.
    let limit: Int
    /// The sliding window.
    let window: Duration
    /// When the admitted events of the current window were sent, oldest first.
    private var sent: Deque<ContinuousClock.Instant> = []

    /// A limiter with Pusher's limit by default.
    init(limit: Int = PusherLimits.clientEventsPerSecond, window: Duration = .seconds(1)) {
        self.limit = limit
        self.window = window
    }

    /// How many events count against the limit at the last admission.
    var eventsInWindow: Int { sent.count }

    /// The application wants to send a client event at `now`: `true` admits it (and counts it),
    /// `false` refuses it (not counted).
    mutating func admit(now: ContinuousClock.Instant) -> Bool {
        while let oldest = sent.first, now - oldest >= window { sent.removeFirst() }
        guard sent.count < limit else { return false }
        sent.append(now)
        return true
    }

    /// The connection ended: the limit is per connection.
    mutating func connectionLost() { sent.removeAll() }
}
