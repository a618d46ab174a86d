/// Recognises another process taking this client's MQTT session over, again and again.
///
/// Two processes with one MQTT client id (a second instance started from the same config file)
/// cannot both stay connected: the broker closes the older connection when the newer one connects
/// (MQTT 5 §3.1.4), the older reconnects at once and takes the session back, and the pair flaps.
/// A broker may say so with DISCONNECT reason 0x8E "Session taken over"; mosquitto 2.0.11 does
/// not — it closes the socket and the client sees a plain lost connection (libmosquitto code 7).
/// So besides 0x8E this recognises the pattern: `losses` connections in a row lost within
/// `window`, every one after the first within `shortConnection` of its CONNACK, while every
/// reconnect was accepted at its first attempt (the broker itself is fine). A failed attempt (a
/// broker restart, a network outage), a loss with another reason (a broker's DISCONNECT reason
/// other than 0x8E, a keep-alive timeout) or a connection that stays up longer starts the count over.
///
/// The first loss of a run may follow a long connection: the process that was connected when the
/// other one started sees its first loss before the newcomer sees any, so it completes the run
/// first — with two processes the older one recognises the pattern half a flap before the newer one.
///
/// Pure (docs/style.md §1): no I/O, no clock reads; events take `now:`. The owner reports a
/// ``Decision`` once per episode; ``isSuspected(now:)`` stays true until a connection stays up
/// for `clearAfter`.
public struct MQTTSessionTakeoverDetector: Sendable {
    /// MQTT 5's DISCONNECT reason code "Session taken over".
    public static let sessionTakenOverReason = 0x8E

    /// What the owner does about an event.
    public enum Decision: Sendable, Equatable {
        /// Nothing to report.
        case none
        /// The broker closed the connection with reason 0x8E, "Session taken over".
        case takenOver
        /// The takeover pattern: `losses` connections lost shortly after their CONNACK, in a row,
        /// within `within`.
        case takeoverPattern(losses: Int, within: Duration)
    }

    /// The thresholds of the pattern.
    public struct Thresholds: Sendable, Equatable {
        /// A connection lost sooner than this after its CONNACK counts as taken over.
        public var shortConnection: Duration
        /// How many losses in a row make the pattern.
        public var losses: Int
        /// The losses must fall within this time.
        public var window: Duration
        /// A connection that stays up this long ends a reported episode.
        public var clearAfter: Duration

        /// The defaults: 3 losses in 30 s, each after the first within 5 s of its CONNACK; an
        /// episode ends after 30 s connected.
        public init(
            shortConnection: Duration = .seconds(5), losses: Int = 3, window: Duration = .seconds(30),
            clearAfter: Duration = .seconds(30)
        ) {
            self.shortConnection = shortConnection
            self.losses = max(2, losses)
            self.window = window
            self.clearAfter = clearAfter
        }
    }

    /// The thresholds in use.
    public let thresholds: Thresholds
    /// The CONNACK of the current connection; nil while not connected.
    public private(set) var connectedSince: ContinuousClock.Instant?
    /// The losses of the current run, oldest first.
    private var run: [ContinuousClock.Instant] = []
    /// When the current episode was reported; nil when none is under way.
    public private(set) var reportedAt: ContinuousClock.Instant?

    /// A detector with `thresholds`.
    public init(thresholds: Thresholds = Thresholds()) {
        self.thresholds = thresholds
    }

    /// The broker accepted CONNECT.
    public mutating func connected(now: ContinuousClock.Instant) {
        connectedSince = now
    }

    /// The client is disconnected: after a CONNACK the connection was lost (`reasonCode`: the
    /// MQTT 5 DISCONNECT reason or libmosquitto's error code, when known); before one an attempt failed.
    public mutating func disconnected(reasonCode: Int?, now: ContinuousClock.Instant) -> Decision {
        guard let since = connectedSince else {
            // A failed attempt: the broker is not simply handing the session to someone else.
            run.removeAll()
            return .none
        }
        connectedSince = nil
        let lasted = since.duration(to: now)
        if let reported = reportedAt, lasted >= thresholds.clearAfter, reported < since {
            reportedAt = nil
        }
        if reasonCode == Self.sessionTakenOverReason {
            run.removeAll()
            return report(.takenOver, now: now)
        }
        if let code = reasonCode, Self.explainsOtherwise(code) {
            run.removeAll()
            return .none
        }
        if lasted >= thresholds.shortConnection { run.removeAll() }
        run.append(now)
        let window = thresholds.window
        run.removeAll { $0.duration(to: now) > window }
        guard run.count >= thresholds.losses, let first = run.first else { return .none }
        let decision = Decision.takeoverPattern(losses: run.count, within: first.duration(to: now))
        run.removeAll()
        return report(decision, now: now)
    }

    /// Whether an episode is under way: reported, and no connection has stayed up for `clearAfter` since.
    public func isSuspected(now: ContinuousClock.Instant) -> Bool {
        guard reportedAt != nil else { return false }
        if let since = connectedSince, since.duration(to: now) >= thresholds.clearAfter { return false }
        return true
    }

    /// Whether a lost connection's `code` names another cause: a broker's DISCONNECT reason other
    /// than 0x8E (≥ 0x80: server shutting down, keep-alive timeout, not authorised, …) or this
    /// client's own keep-alive timeout. A takeover without a reason is a plain lost connection.
    static func explainsOtherwise(_ code: Int) -> Bool {
        code >= 0x80 || code == Int(MosquittoCode.keepAliveExpired)
    }

    /// `decision` the first time in an episode, `.none` while it is already reported.
    private mutating func report(_ decision: Decision, now: ContinuousClock.Instant) -> Decision {
        guard !isSuspected(now: now) else { return .none }
        reportedAt = now
        return decision
    }
}
