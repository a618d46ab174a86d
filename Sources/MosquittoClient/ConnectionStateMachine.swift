import Backoff

/// Decides when the MQTT connection is opened, retried, drained and closed.
///
/// Pure: no I/O, no logging, no clock reads, no randomness of its own. `now` and the jitter's
/// `unitRandom` come in with the events, so tests drive it with numbers (docs/style.md §1–2). It is
/// the reconnect part of `MQTTSessionStateMachine`, which carries it in its states, feeds it what
/// the network thread saw and turns its actions into the session's.
///
/// Reconnect timing follows docs/contract.md §5.5 with the shared `ReconnectPolicy`: the n-th retry since
/// the last stable connection waits `policy.delay(attempt: n)`. A connection that stayed up for
/// `policy.stableAfter` resets n to 0; a connection that flaps (drops sooner) keeps counting, so
/// a broker that accepts and then kicks us does not get a hot loop. libmosquitto's own reconnect
/// (quadratic, whole seconds, no jitter — docs/mqtt-notes.md §7) is never used.
///
/// With several broker addresses (`MQTTConfiguration.brokers`, a broker cluster's nodes) every
/// attempt that fails and every connection that is lost moves ``broker`` on to the next address,
/// round and round, with the same backoff: the first that answers is kept.
struct ConnectionStateMachine: Sendable {
    /// Where the connection is.
    enum Phase: Sendable, Equatable {
        /// `start()` not called yet.
        case idle
        /// TCP/TLS/CONNECT under way, CONNACK not yet seen.
        case connecting(attempt: Int)
        /// CONNACK accepted at `since`.
        case connected(since: ContinuousClock.Instant)
        /// Waiting for the backoff to elapse before attempt `attempt`.
        case waiting(until: ContinuousClock.Instant, attempt: Int)
        /// Shutdown requested while connected: draining acknowledgements, then DISCONNECT.
        case draining
        /// Finished; nothing more happens.
        case stopped
    }

    /// What the network thread must do next.
    enum Action: Sendable, Equatable {
        /// Open a connection (TCP, TLS, CONNECT with our properties). `attempt` is for states and logs.
        case connect(attempt: Int)
        /// CONNACK accepted: mark the client connected, send what waited, and resubscribe every
        /// known subscription when `resubscribe` (the broker has no session for us, MQTT 3.1.1
        /// §3.2.2.2 / MQTT 5 §3.2.2.1.1 Session Present).
        case markConnected(sessionPresent: Bool, resubscribe: Bool)
        /// Report `error` and wait `after` before calling `reconnectDue(now:)`.
        case scheduleReconnect(after: Duration, error: MQTTError)
        /// `ReconnectPolicy.maxAttempts` is used up: stop for good with `error`.
        case giveUp(MQTTError)
        /// Shutdown while connected: wait (bounded) for outstanding acks, then send DISCONNECT.
        case disconnect
        /// Release everything; the client is finished.
        case stop
        /// Nothing to do (an event that does not apply in this phase).
        case none
    }

    /// The shared backoff policy.
    let policy: ReconnectPolicy
    /// The current phase.
    private(set) var phase: Phase = .idle
    /// The number of the next retry since the last stable connection (the `n` of `policy.delay`).
    private(set) var retry = 0
    /// How many broker addresses there are (at least 1).
    let brokers: Int
    /// The index of the address the current or next attempt uses.
    private(set) var broker = 0

    init(policy: ReconnectPolicy, brokers: Int = 1) {
        self.policy = policy
        self.brokers = max(1, brokers)
    }

    /// The instant the owner should wake up for `reconnectDue(now:)`, when waiting.
    var reconnectDeadline: ContinuousClock.Instant? {
        if case .waiting(let until, _) = phase { return until }
        return nil
    }

    /// `start()` was called.
    mutating func start() -> Action {
        guard case .idle = phase else { return .none }
        phase = .connecting(attempt: 0)
        return .connect(attempt: 0)
    }

    /// The broker accepted CONNECT.
    mutating func connackAccepted(sessionPresent: Bool, now: ContinuousClock.Instant) -> Action {
        guard case .connecting = phase else { return .none }
        phase = .connected(since: now)
        return .markConnected(sessionPresent: sessionPresent, resubscribe: !sessionPresent)
    }

    /// TCP/TLS failed, or the broker refused CONNECT (MQTT 5 refusals included, docs/mqtt-notes.md §6).
    mutating func connectFailed(
        _ error: MQTTError, now: ContinuousClock.Instant, unitRandom: Double
    ) -> Action {
        guard case .connecting = phase else { return .none }
        broker = (broker + 1) % brokers
        return scheduleRetry(error, now: now, unitRandom: unitRandom)
    }

    /// An established connection broke (socket error, keep-alive timeout, server DISCONNECT).
    mutating func connectionLost(
        _ error: MQTTError, now: ContinuousClock.Instant, unitRandom: Double
    ) -> Action {
        switch phase {
        case .connected(let since):
            if since.duration(to: now) >= policy.stableAfter { retry = 0 }
            broker = (broker + 1) % brokers
            return scheduleRetry(error, now: now, unitRandom: unitRandom)
        case .draining:
            phase = .stopped
            return .stop
        case .idle, .connecting, .waiting, .stopped:
            return .none
        }
    }

    /// The owner woke up; reconnect if the backoff has elapsed.
    mutating func reconnectDue(now: ContinuousClock.Instant) -> Action {
        guard case .waiting(let until, let attempt) = phase, now >= until else { return .none }
        phase = .connecting(attempt: attempt)
        return .connect(attempt: attempt)
    }

    /// `shutdown()` was called.
    mutating func shutdownRequested() -> Action {
        switch phase {
        case .connected:
            phase = .draining
            return .disconnect
        case .idle, .connecting, .waiting:
            phase = .stopped
            return .stop
        case .draining, .stopped:
            return .none
        }
    }

    /// The DISCONNECT we sent on shutdown went out (or the drain gave up).
    mutating func disconnected() -> Action {
        guard case .draining = phase else { return .none }
        phase = .stopped
        return .stop
    }

    private mutating func scheduleRetry(
        _ error: MQTTError, now: ContinuousClock.Instant, unitRandom: Double
    ) -> Action {
        guard policy.allowsAttempt(retry) else {
            phase = .stopped
            return .giveUp(error)
        }
        let delay = policy.delay(attempt: retry, unitRandom: unitRandom)
        retry += 1
        phase = .waiting(until: now + delay, attempt: retry)
        return .scheduleReconnect(after: delay, error: error)
    }
}
