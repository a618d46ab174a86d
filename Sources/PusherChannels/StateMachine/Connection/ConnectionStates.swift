import PusherProtocol

// The states of ``ConnectionLifecycle`` that carry data, one type per state (the idle and
// disconnecting states carry none).

/// The transport is being opened or is open, and `pusher:connection_established` has not come.
struct ConnectingState: Sendable, Equatable {
    /// When the transport was asked to open.
    let since: ContinuousClock.Instant

    /// When the handshake has taken too long.
    func deadline(handshakeTimeout: Duration) -> ContinuousClock.Instant { since + handshakeTimeout }
}

/// Connected: the keep-alive of one connection (docs/pusher-protocol.md §1 "Keep-alive").
///
/// After `activityTimeout` without any frame it asks for a `pusher:ping`; when no frame at all
/// arrives within `pongTimeout` after that ping, the connection is dead.
struct ConnectedState: Sendable, Equatable {
    /// What time passing calls for.
    enum KeepAlive: Sendable, Equatable {
        /// No deadline has passed.
        case nothingDue
        /// The connection was quiet for the activity timeout: send `pusher:ping`.
        case sendPing
        /// No frame came within the pong timeout after our ping: drop the connection.
        case pongMissing
    }

    /// The server's name for this connection.
    let socketID: String
    /// The effective activity timeout: min(ours, the server's).
    let activityTimeout: Duration
    /// When `pusher:connection_established` arrived.
    let connectedAt: ContinuousClock.Instant
    /// When the last frame arrived.
    private(set) var lastActivity: ContinuousClock.Instant
    /// When we sent a ping that no frame has answered yet.
    private(set) var pingSentAt: ContinuousClock.Instant?

    /// A connection established at `now`.
    init(socketID: String, activityTimeout: Duration, now: ContinuousClock.Instant) {
        self.socketID = socketID
        self.activityTimeout = activityTimeout
        self.connectedAt = now
        self.lastActivity = now
        self.pingSentAt = nil
    }

    /// A frame (any frame, even a malformed one) arrived: the connection is alive.
    mutating func receivedActivity(now: ContinuousClock.Instant) {
        lastActivity = now
        pingSentAt = nil
    }

    /// When ``timeElapsed(now:pongTimeout:)`` next has something to do.
    func deadline(pongTimeout: Duration) -> ContinuousClock.Instant {
        pingSentAt.map { $0 + pongTimeout } ?? lastActivity + activityTimeout
    }

    /// Time passed; a ping asked for is recorded as sent at `now`.
    mutating func timeElapsed(now: ContinuousClock.Instant, pongTimeout: Duration) -> KeepAlive {
        if let sent = pingSentAt {
            return now >= sent + pongTimeout ? .pongMissing : .nothingDue
        }
        guard now >= lastActivity + activityTimeout else { return .nothingDue }
        pingSentAt = now
        return .sendPing
    }

    /// The effective activity timeout: the server's value (seconds) can only lower ours.
    static func activityTimeout(ours: Duration, serverSeconds: Double?) -> Duration {
        // Compare before converting: a huge or infinite value (`1e300`) would trap in
        // `Int64(seconds * 1000)` (found by `make fuzz`).
        let oursSeconds = Double(ours.components.seconds) + Double(ours.components.attoseconds) / 1e18
        guard let seconds = serverSeconds, seconds > 0, seconds < oursSeconds else { return ours }
        return .milliseconds(Int64(seconds * 1000))
    }
}

/// We asked the transport to close for a reason of our own and wait for it to end.
struct DroppingState: Sendable, Equatable {
    /// Why we close the connection.
    enum Reason: Sendable, Equatable {
        /// No frame came within the pong timeout after our ping.
        case pongTimeout
        /// `pusher:connection_established` did not come within the handshake timeout.
        case handshakeTimeout
        /// The server broke the protocol (e.g. a handshake without a valid socket id).
        case protocolError
    }

    /// Why we close it.
    let reason: Reason
    /// When the connection had been established, if it had.
    let connectedAt: ContinuousClock.Instant?

    /// How to reconnect once it has ended: a missing pong like close code 4201 "pong reply not
    /// received"; the others like an unknown close.
    var closeCodeAction: CloseCodeAction {
        switch reason {
        case .pongTimeout: .reconnectImmediately
        case .handshakeTimeout, .protocolError: .backoffUnknown
        }
    }
}

/// The connection was lost and a reconnect is due at `until`.
struct WaitingState: Sendable, Equatable {
    /// When to open the next transport.
    let until: ContinuousClock.Instant
}
