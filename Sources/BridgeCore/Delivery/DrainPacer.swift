/// The paced drain of one direction's backlog (docs/contract.md §8.3, `drain_rate`): pure, with
/// the clock passed in.
///
/// The backlog is what was received before delivery last resumed — the bridge's start (what the
/// spool holds), the far side coming back after an outage, a pause lifted. Those messages leave at
/// most `ratePerSecond` on average (a batch may go at once; the next waits its turn); messages
/// received after the resume are live and are never held here. They may still wait behind the
/// backlog of their own channel, whose order is kept.
///
/// The schedule banks at most ``catchUp`` of credit: a sender that fell behind by less (a slow
/// request, a late wake-up) catches up, so the backlog keeps the rate on average; after a longer
/// quiet spell pacing starts again from the moment the next backlog message asks, so no burst of
/// more than a second's worth goes out at once.
public struct DrainPacer: Sendable, Equatable {
    public typealias Instant = ContinuousClock.Instant

    /// The cap, messages per second (> 0).
    public let ratePerSecond: Double
    /// Messages received before this (ms since 1970) are backlog.
    public private(set) var backlogBefore: Int64
    /// When the current run of paced messages started, and how many have been let through since.
    private var origin: Instant?
    private var letThrough = 0
    /// Backlog messages let through since the start (for tests and logs).
    public private(set) var paced = 0
    /// How far behind its schedule the drain may fall and still catch up.
    public static let catchUp = Duration.seconds(1)

    /// A pacer whose backlog is what was received before `startedAtMillis` (the spool's content).
    public init(ratePerSecond: Double, startedAtMillis: Int64) {
        self.ratePerSecond = ratePerSecond
        self.backlogBefore = startedAtMillis
    }

    /// Delivery resumed at `atMillis` (wall clock) after an outage: what was received before then is
    /// backlog, and its pacing starts afresh.
    public mutating func resumed(atMillis: Int64) {
        backlogBefore = max(backlogBefore, atMillis)
        origin = nil
        letThrough = 0
    }

    /// Whether a message received at `receivedAtMillis` is backlog.
    public func isBacklog(receivedAtMillis: Int64) -> Bool { receivedAtMillis < backlogBefore }

    /// `backlog` backlog messages want to leave at `now`: how long they must wait first (zero: go
    /// now). Counts them as let through after that wait.
    public mutating func admit(backlog: Int, now: Instant) -> Duration {
        guard backlog > 0 else { return .zero }
        var start = origin ?? now
        var due = start + .seconds(Double(letThrough) / ratePerSecond)
        if due < now - Self.catchUp {
            // Far behind (a quiet spell, or the far side slower than the cap): no credit.
            start = now
            letThrough = 0
            due = now
        }
        origin = start
        letThrough += backlog
        paced += backlog
        return max(.zero, due - now)
    }
}
