import PusherProtocol

/// The connection's phases and their deadlines: open, handshake (at most `handshakeTimeout`),
/// keep-alive (``ConnectedState``), close, and reconnect by close code (``ReconnectSchedule``).
///
/// Knows nothing of channels: events that end a connection say so in their ``Outcome`` and the
/// composing ``PusherConnectionStateMachine`` resets what the server forgot.
struct ConnectionLifecycle: Sendable {
    /// Where the connection is; the states that carry data are types of their own.
    enum Phase: Sendable, Equatable {
        /// No connection, none wanted.
        case idle
        /// Opening, waiting for `pusher:connection_established`.
        case connecting(ConnectingState)
        /// Connected; keep-alive running.
        case connected(ConnectedState)
        /// We asked the transport to close for a reason of our own; waiting for it to end.
        case dropping(DroppingState)
        /// The application asked to disconnect; waiting for the transport to end.
        case disconnecting
        /// Lost; a reconnect is due.
        case waiting(WaitingState)
    }

    /// The actions of an event and whether it ended the connection the server knew our
    /// subscriptions on (they must all be sent again, with new auth, on the next one).
    struct Outcome: Sendable, Equatable {
        /// What the I/O owner must do, in order.
        var actions: [PusherConnectionStateMachine.Action]
        /// The connection ended: the server forgot our subscriptions.
        var connectionEnded: Bool
    }

    /// Our activity timeout; the effective one is min(this, the server's).
    let activityTimeout: Duration
    /// How long to wait for any frame after sending `pusher:ping`.
    let pongTimeout: Duration
    /// How long to wait for `pusher:connection_established` after opening.
    let handshakeTimeout: Duration
    /// Where the connection is.
    private(set) var phase: Phase = .idle
    private var reconnects: ReconnectSchedule
    /// `connect()` came while the previous connection was still closing: connect once it is closed.
    private var connectAfterDisconnect = false

    /// An idle lifecycle.
    init(configuration: PusherConnectionStateMachine.Configuration, jitterSeed: UInt64) {
        activityTimeout = configuration.activityTimeout
        pongTimeout = configuration.pongTimeout
        handshakeTimeout = configuration.handshakeTimeout
        reconnects = ReconnectSchedule(
            policy: configuration.reconnectPolicy,
            autoReconnect: configuration.autoReconnect,
            retryAfterRefusal: configuration.retryAfterRefusal,
            jitterSeed: jitterSeed
        )
    }

    // MARK: queries

    /// The state PusherSwift users know.
    var connectionState: PusherConnectionState { Self.state(of: phase) }

    /// The current connection's socket id, when connected.
    var socketID: String? {
        if case .connected(let connection) = phase { return connection.socketID }
        return nil
    }

    /// The effective activity timeout of the current connection.
    var effectiveActivityTimeout: Duration? {
        if case .connected(let connection) = phase { return connection.activityTimeout }
        return nil
    }

    /// Failed attempts since the last stable connection.
    var failedAttempts: Int { reconnects.attempt }

    /// The next time ``timeElapsed(now:)`` has something to do, or `nil`.
    var nextDeadline: ContinuousClock.Instant? {
        switch phase {
        case .connecting(let connecting): connecting.deadline(handshakeTimeout: handshakeTimeout)
        case .connected(let connected): connected.deadline(pongTimeout: pongTimeout)
        case .waiting(let waiting): waiting.until
        case .idle, .dropping, .disconnecting: nil
        }
    }

    // MARK: events

    /// The application asked to connect.
    mutating func connectRequested(now: ContinuousClock.Instant) -> [PusherConnectionStateMachine.Action] {
        switch phase {
        case .idle, .waiting:
            if case .idle = phase { reconnects.connectRequestedWhileDisconnected() }
            return open(now: now)
        case .disconnecting:
            connectAfterDisconnect = true
            return []
        case .connecting, .connected, .dropping:
            return []
        }
    }

    /// The application asked to disconnect.
    mutating func disconnectRequested(now: ContinuousClock.Instant) -> Outcome {
        var actions: [PusherConnectionStateMachine.Action] = []
        connectAfterDisconnect = false
        switch phase {
        case .connecting, .connected, .dropping:
            transition(to: .disconnecting, &actions)
            actions.append(.closeTransport)
            return Outcome(actions: actions, connectionEnded: true)
        case .waiting:
            transition(to: .idle, &actions)
            return Outcome(actions: actions, connectionEnded: true)
        case .idle, .disconnecting:
            return Outcome(actions: actions, connectionEnded: false)
        }
    }

    /// The transport ended with the server's close `code` (`nil`: no close frame).
    mutating func transportClosed(code: UInt16?, now: ContinuousClock.Instant) -> Outcome {
        switch phase {
        case .idle, .waiting:
            return Outcome(actions: [], connectionEnded: false)
        case .disconnecting:
            var actions: [PusherConnectionStateMachine.Action] = []
            transition(to: .idle, &actions)
            if connectAfterDisconnect {
                connectAfterDisconnect = false
                actions += connectRequested(now: now)
            }
            return Outcome(actions: actions, connectionEnded: false)
        case .dropping(let dropping):
            return lost(dropping.closeCodeAction, closeCode: nil, connectedAt: dropping.connectedAt, now: now)
        case .connecting:
            let action = code.map { PusherCloseCode($0).action } ?? .backoffUnknown
            return lost(action, closeCode: code, connectedAt: nil, now: now)
        case .connected(let connected):
            let action = code.map { PusherCloseCode($0).action } ?? .backoffUnknown
            return lost(action, closeCode: code, connectedAt: connected.connectedAt, now: now)
        }
    }

    /// The transport could not be opened or failed without a close frame.
    mutating func transportFailed(message: String, now: ContinuousClock.Instant) -> Outcome {
        switch phase {
        case .connecting, .connected:
            var outcome = transportClosed(code: nil, now: now)
            outcome.actions.insert(.error(.transport(message)), at: 0)
            return outcome
        case .idle, .waiting, .disconnecting, .dropping:
            return transportClosed(code: nil, now: now)
        }
    }

    /// Time passed: send a ping, give up on a missing pong or handshake, start a due reconnect.
    mutating func timeElapsed(now: ContinuousClock.Instant) -> [PusherConnectionStateMachine.Action] {
        switch phase {
        case .connecting(let connecting):
            guard now >= connecting.deadline(handshakeTimeout: handshakeTimeout) else { return [] }
            return drop(.handshakeTimeout, connectedAt: nil)
        case .connected(var connected):
            switch connected.timeElapsed(now: now, pongTimeout: pongTimeout) {
            case .nothingDue:
                return []
            case .sendPing:
                phase = .connected(connected)
                return [.send(ClientFrame.ping)]
            case .pongMissing:
                return drop(.pongTimeout, connectedAt: connected.connectedAt)
            }
        case .waiting(let waiting):
            guard now >= waiting.until else { return [] }
            return open(now: now)
        case .idle, .dropping, .disconnecting:
            return []
        }
    }

    /// `pusher:connection_established` arrived while connecting, with `data` (`nil`: no valid socket id).
    mutating func connectionEstablished(
        _ data: ProtocolEventData.ConnectionEstablished?,
        now: ContinuousClock.Instant
    ) -> [PusherConnectionStateMachine.Action] {
        guard case .connecting = phase else { return [] }
        guard let data else {
            var actions: [PusherConnectionStateMachine.Action] = [
                .error(.malformedFrame("connection_established without a valid socket_id"))
            ]
            actions += drop(.protocolError, connectedAt: nil)
            return actions
        }
        let activity = ConnectedState.activityTimeout(ours: activityTimeout, serverSeconds: data.activityTimeoutSeconds)
        var actions: [PusherConnectionStateMachine.Action] = []
        transition(to: .connected(ConnectedState(socketID: data.socketID, activityTimeout: activity, now: now)), &actions)
        return actions
    }

    /// A frame arrived; while connected it counts as activity (docs/pusher-protocol.md §1 "Keep-alive").
    mutating func receivedActivity(now: ContinuousClock.Instant) {
        guard case .connected(var connected) = phase else { return }
        connected.receivedActivity(now: now)
        phase = .connected(connected)
    }

    // MARK: transitions

    private mutating func open(now: ContinuousClock.Instant) -> [PusherConnectionStateMachine.Action] {
        var actions: [PusherConnectionStateMachine.Action] = []
        transition(to: .connecting(ConnectingState(since: now)), &actions)
        actions.append(.openTransport)
        return actions
    }

    private mutating func drop(_ reason: DroppingState.Reason, connectedAt: ContinuousClock.Instant?)
        -> [PusherConnectionStateMachine.Action]
    {
        var actions: [PusherConnectionStateMachine.Action] = []
        transition(to: .dropping(DroppingState(reason: reason, connectedAt: connectedAt)), &actions)
        actions.append(.closeTransport)
        return actions
    }

    private mutating func lost(
        _ action: CloseCodeAction,
        closeCode: UInt16?,
        connectedAt: ContinuousClock.Instant?,
        now: ContinuousClock.Instant
    ) -> Outcome {
        var actions: [PusherConnectionStateMachine.Action] = []
        if case .doNotRetryUnchanged = action {
            let code = Int(closeCode ?? 0)
            actions.append(.error(.connectionRefused(closeCode: code, reason: PusherCloseCode(UInt16(code)).reason)))
        }
        switch reconnects.connectionLost(action, connectedAt: connectedAt, now: now) {
        case .stayDisconnected:
            transition(to: .idle, &actions)
        case .giveUp(let attempts):
            actions.append(.error(.gaveUp(attempts: attempts)))
            transition(to: .idle, &actions)
        case .reconnect(let delay, let attempt) where delay == .zero:
            actions.append(.reconnectScheduled(after: .zero, attempt: attempt))
            actions += open(now: now)
        case .reconnect(let delay, let attempt):
            transition(to: .waiting(WaitingState(until: now + delay)), &actions)
            actions.append(.reconnectScheduled(after: delay, attempt: attempt))
        }
        return Outcome(actions: actions, connectionEnded: true)
    }

    private mutating func transition(to next: Phase, _ actions: inout [PusherConnectionStateMachine.Action]) {
        let before = Self.state(of: phase)
        phase = next
        let after = Self.state(of: next)
        if before != after {
            actions.append(
                .connectionStateChanged(PusherConnectionStateChange(previous: before, current: after, socketID: socketID))
            )
        }
    }

    private static func state(of phase: Phase) -> PusherConnectionState {
        switch phase {
        case .idle: .disconnected
        case .connecting: .connecting
        case .connected: .connected
        case .dropping, .waiting: .reconnecting
        case .disconnecting: .disconnecting
        }
    }
}
