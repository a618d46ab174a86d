import Backoff
import PusherProtocol

/// When to reconnect after losing a connection, by close code class (docs/contract.md §5.5), with the
/// attempt counter and the seeded jitter. Pure: time comes in as `now:`.
///
/// - 4000–4099 refused: only at the backoff cap, or not at all without `retryAfterRefusal`;
/// - 4100–4199: backoff, at least 1 s;
/// - 4200–4299 (and a missing pong): at once within a random 0–500 ms, then backoff if it keeps
///   failing;
/// - others: backoff.
///
/// The attempt counter starts over after a connection stayed up `stableAfter`.
struct ReconnectSchedule: Sendable {
    /// What to do after a loss.
    enum Decision: Sendable, Equatable {
        /// Stay disconnected: auto-reconnect is off, or the server refused us and we stop.
        case stayDisconnected
        /// The policy's attempt limit is reached after `attempts` failed attempts.
        case giveUp(attempts: Int)
        /// Reconnect after `delay` (may be zero); `attempt` counts from 1 since the last stable connection.
        case reconnect(after: Duration, attempt: Int)
    }

    /// How long a connection must have been up for a 4200–4299 close to reconnect at once even
    /// after earlier reconnects (at most one reconnect per this interval: never a hot loop).
    static let immediateReconnectAfterUptime: Duration = .seconds(2)

    /// The longest wait of a reconnect "at once" (4200–4299, pong timeout): the delay is drawn
    /// uniformly from zero to this.
    static let immediateReconnectSpread: Duration = .milliseconds(500)

    /// Backoff, cap, attempt limit and stability window.
    let policy: ReconnectPolicy
    /// Whether to reconnect at all.
    let autoReconnect: Bool
    /// After a 4000–4099 close: retry at the cap (`true`) or stop (`false`).
    let retryAfterRefusal: Bool
    /// Failed attempts since the last stable connection.
    private(set) var attempt = 0
    private var jitter: JitterSource

    /// A schedule with no failed attempts; `jitterSeed` makes the jitter reproducible.
    init(policy: ReconnectPolicy, autoReconnect: Bool, retryAfterRefusal: Bool, jitterSeed: UInt64) {
        self.policy = policy
        self.autoReconnect = autoReconnect
        self.retryAfterRefusal = retryAfterRefusal
        self.jitter = JitterSource(seed: jitterSeed)
    }

    /// The application connected from idle: a fresh start.
    mutating func connectRequestedWhileDisconnected() { attempt = 0 }

    /// A connection (established at `connectedAt`, if it was) ended in a way that calls for `action`.
    mutating func connectionLost(
        _ action: CloseCodeAction,
        connectedAt: ContinuousClock.Instant?,
        now: ContinuousClock.Instant
    ) -> Decision {
        if let connectedAt, now - connectedAt >= policy.stableAfter { attempt = 0 }
        // 4200–4299 on a connection that worked for a while is the server asking for a new one
        // (docs/contract.md §5.5: "reconnect at once"), not a failed attempt: start the count over, or 20
        // such closes within `stableAfter` would climb to the backoff cap (seen in the fault
        // matrix, Tests/faults, row close-4200). A server that closes sooner still gets backoff.
        if case .reconnectImmediately = action, let connectedAt, now - connectedAt >= Self.immediateReconnectAfterUptime {
            attempt = 0
        }
        let refusedAndStop: Bool =
            if case .doNotRetryUnchanged = action { !retryAfterRefusal } else { false }
        guard autoReconnect, !refusedAndStop else { return .stayDisconnected }
        guard policy.allowsAttempt(attempt) else { return .giveUp(attempts: attempt) }
        let delay: Duration =
            switch action {
            // 4200–4299: at once, spread at random over at most 500 ms whatever the policy's
            // initial delay (docs/contract.md §5.5), so a fleet the server closes together does not return
            // together — unless the last attempt already failed, so a server that closes every
            // new connection with 4200 cannot make us spin.
            case .reconnectImmediately:
                attempt == 0 ? Self.immediateReconnectSpread * jitter.next() : policy.delay(attempt: attempt, unitRandom: jitter.next())
            // 4100–4199: backoff, at least 1 s (docs/pusher-protocol.md §1 "Close codes").
            case .backoff: max(.seconds(1), policy.delay(attempt: attempt, unitRandom: jitter.next()))
            case .backoffUnknown: policy.delay(attempt: attempt, unitRandom: jitter.next())
            // 4000–4099: never a hot loop; only at the cap (docs/contract.md §5.5).
            case .doNotRetryUnchanged: policy.delay(attempt: Int(Int32.max), unitRandom: jitter.next())
            }
        attempt += 1
        return .reconnect(after: delay, attempt: attempt)
    }
}

/// SplitMix64: a tiny seeded generator, so the machine's jitter is data, not a clock or a
/// global generator — tests reproduce every delay.
struct JitterSource: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// A value in [0, 1].
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}
