/// When to log a degraded spool (docs/contract.md §7.6): a line when it degrades, then at most one
/// a minute while it stays degraded, with the count of messages in memory only; a line when it
/// resumes, if its degradation was logged. A spool that degrades again within a minute of its last
/// line waits for the minute: at most one degraded line and one resumed line a minute.
struct SpoolDegradedLog<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// A line to log.
    enum Line: Equatable {
        /// The spool degraded: this many messages are held in memory only.
        case degraded(memoryOnly: Int)
        /// A minute later, still degraded.
        case stillDegraded(memoryOnly: Int)
        /// Writes succeed again; everything is on disk.
        case resumed
    }

    /// The shortest time between two degraded lines.
    static var interval: Duration { .seconds(60) }

    private var lastLine: Instant?
    private var announced = false

    /// The spool's state at `now` (observed about once a second): the line to log, if any.
    mutating func observed(degraded: Bool, memoryOnly: Int, now: Instant) -> Line? {
        guard degraded else {
            guard announced else { return nil }
            announced = false
            return .resumed
        }
        if let lastLine, lastLine.duration(to: now) < Self.interval { return nil }
        lastLine = now
        defer { announced = true }
        return announced ? .stillDegraded(memoryOnly: memoryOnly) : .degraded(memoryOnly: memoryOnly)
    }
}
