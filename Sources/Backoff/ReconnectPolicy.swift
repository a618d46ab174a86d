#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How long to wait before reconnect attempt `n`: capped exponential backoff with jitter.
///
/// Both sides of a bridge (Pusher and MQTT) reconnect with this one policy (docs/contract.md §5.5):
///
///     delay(n) = min(maxDelay, initialDelay × multiplierⁿ) × random(1 − jitter, 1 + jitter)
///
/// `n` counts failed attempts since the last stable connection, starting at 0. The cap is applied
/// before jitter, so a delay may exceed `maxDelay` by at most `jitter × maxDelay`; the spread keeps
/// a fleet of bridges that lost the same server from reconnecting in lockstep.
///
/// Example values for the defaults (1 s, ×2, cap 120 s) with `jitter: 0`:
///
/// | n     | 0 | 1 | 2 | 3 | 4  | 5  | 6  | 7   | 8…  |
/// |-------|---|---|---|---|----|----|----|-----|-----|
/// | delay | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 120 | 120 |
///
/// With the default `jitter: 0.2` each value is scaled by a factor drawn from [0.8, 1.2].
public struct ReconnectPolicy: Sendable, Hashable {
    /// The delay before the first reconnect attempt (n = 0).
    public var initialDelay: Duration
    /// The cap on the un-jittered delay (PusherSwift's `maxReconnectGapInSeconds`).
    public var maxDelay: Duration
    /// Growth factor per failed attempt; 1 gives a constant delay.
    public var multiplier: Double
    /// Relative spread in [0, 1]: each delay is scaled by a random factor in [1 − jitter, 1 + jitter].
    public var jitter: Double
    /// Give up after this many attempts (PusherSwift's `reconnectAttemptsMax`); `nil` = never give up.
    public var maxAttempts: Int?
    /// A connection that stayed up this long counts as stable: the attempt counter starts over.
    public var stableAfter: Duration

    public init(
        initialDelay: Duration = .seconds(1),
        maxDelay: Duration = .seconds(120),
        multiplier: Double = 2.0,
        jitter: Double = 0.2,
        maxAttempts: Int? = nil,
        stableAfter: Duration = .seconds(30)
    ) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.multiplier = multiplier
        self.jitter = jitter
        self.maxAttempts = maxAttempts
        self.stableAfter = stableAfter
    }

    /// The policy docs/contract.md §4 ships as the `[bridge.reconnect]` defaults.
    public static let `default` = ReconnectPolicy()

    /// Problems that make a policy unusable, as human-readable sentences; empty when valid.
    public var problems: [String] {
        var found: [String] = []
        if initialDelay <= .zero { found.append("initial_delay must be greater than 0") }
        if maxDelay < initialDelay { found.append("max_delay must be at least initial_delay") }
        if !(multiplier >= 1.0) || !multiplier.isFinite { found.append("multiplier must be a number ≥ 1") }
        if !(0.0...1.0).contains(jitter) { found.append("jitter must be between 0 and 1") }
        if let maxAttempts, maxAttempts < 1 { found.append("max_attempts must be at least 1") }
        return found
    }

    /// Whether attempt `n` (0-based) may still be made.
    public func allowsAttempt(_ n: Int) -> Bool {
        guard let maxAttempts else { return true }
        return n < maxAttempts
    }

    /// The delay before attempt `n`, with `unitRandom` in [0, 1] choosing the jitter factor
    /// (0 → 1 − jitter, 0.5 → 1, 1 → 1 + jitter). Deterministic: tests pass the random value.
    public func delay(attempt n: Int, unitRandom: Double) -> Duration {
        let capped = cappedSeconds(attempt: n)
        let r = min(max(unitRandom, 0), 1)
        let factor = 1 - jitter + 2 * jitter * r
        return .nanoseconds(Int64((capped * factor * 1e9).rounded()))
    }

    /// The delay before attempt `n`, jittered with `generator`. Pass a generator with state
    /// (a seeded one): an empty one like `SystemRandomNumberGenerator` crashes this generic
    /// function under ThreadSanitizer (see `delay(attempt:)`).
    public func delay(attempt n: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        delay(attempt: n, unitRandom: Double.random(in: 0...1, using: &generator))
    }

    /// The delay before attempt `n`, jittered with the system generator.
    ///
    /// Not via `delay(attempt:using:)`: `SystemRandomNumberGenerator` is an empty struct, whose
    /// address is meaningless, and the compiler's ThreadSanitizer instrumentation of the inout
    /// access inside that generic function passes the address to TSan, which then crashes
    /// (SEGV in `__tsan_external_write`; swiftlang/swift#66099). `Double.random(in:)` sees the
    /// concrete empty type, for which no access is instrumented.
    public func delay(attempt n: Int) -> Duration {
        delay(attempt: n, unitRandom: Double.random(in: 0...1))
    }

    /// min(maxDelay, initialDelay × multiplierⁿ) in seconds. Capping happens in floating point
    /// before any conversion back to `Duration`, so a large `n` cannot overflow.
    private func cappedSeconds(attempt n: Int) -> Double {
        let initial = initialDelay.seconds
        let cap = maxDelay.seconds
        let exponent = Double(max(n, 0))
        let grown = initial * pow(multiplier, exponent)
        guard grown.isFinite else { return cap }
        return min(cap, grown)
    }
}

extension Duration {
    /// This duration in (fractional) seconds.
    public var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
