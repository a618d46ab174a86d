/// Decides which of a flood of similar log lines to write: at most `perMinute` in any window of
/// a minute, and how many were left out since the last one written (rate-limited logs: an
/// overloaded bridge drops thousands of messages a second, and the log must stay readable).
///
/// Pure value type; time is passed in, never read.
public struct RateLimitedLog<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// Lines allowed per window of 60 s.
    public let perMinute: Int
    private var windowStart: Instant?
    private var logged = 0
    private var suppressed = 0

    /// A limiter that allows `perMinute` lines a minute.
    public init(perMinute: Int) { self.perMinute = perMinute }

    /// Whether to log now, and how many lines were suppressed since the last one logged.
    public mutating func allow(now: Instant) -> (Bool, Int) {
        if windowStart.map({ $0.duration(to: now) >= .seconds(60) }) ?? true {
            windowStart = now
            logged = 0
        }
        guard logged < perMinute else {
            suppressed += 1
            return (false, suppressed)
        }
        logged += 1
        defer { suppressed = 0 }
        return (true, suppressed)
    }
}
