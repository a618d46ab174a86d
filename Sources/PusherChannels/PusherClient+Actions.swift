import Logging
import NIOCore
import PusherProtocol

/// Carrying out the machine's actions: frames, streams, work, callbacks and logs.
extension PusherClient {
    // MARK: carrying out actions

    /// What ``perform(_:)`` does after releasing the lock, collected while holding it.
    struct Followups {
        var work: [Work] = []
        var callbacks: [(@Sendable (PusherEvent) -> Void, PusherEvent)] = []
        var logs: [PusherConnectionStateMachine.Action] = []
        /// The event brought the machine's deadline earlier than the one the timer sleeps until.
        var wakeTimer = false
        /// A connection still in its opening handshake that the machine asked to close.
        var closeHandshake: (any Channel)?
    }

    /// Runs one machine event under the lock, sends frames and feeds streams in order while
    /// still holding it (so every stream sees one global order), then — outside the lock —
    /// starts work, runs callbacks and logs.
    func perform(_ event: (inout PusherConnectionStateMachine) -> [PusherConnectionStateMachine.Action]) {
        let followups = state.withLock { state -> Followups in
            var followups = Followups()
            let actions = event(&state.machine)
            for action in actions {
                switch action {
                case .openTransport:
                    state.closePending = false
                    followups.work.append(.openTransport)
                case .closeTransport:
                    if let outgoing = state.outgoing {
                        outgoing.yield(.close)
                        // A drop (the handshake timeout) while the opening handshake is still under
                        // way: no writer reads `.close` yet, and a server that never answers the
                        // upgrade would hold the machine in `dropping` (which has no deadline) for
                        // ever. Closing the connection ends the handshake. (The application's
                        // disconnect keeps the clean close once the WebSocket is open.)
                        if state.machine.connectionState == .reconnecting {
                            state.closeRequested = true
                            followups.closeHandshake = state.handshakeChannel
                            state.handshakeChannel = nil
                        }
                    } else {
                        state.closePending = true
                    }
                case .send(let text):
                    state.outgoing?.yield(.text(text))
                case .authorize(let channel, let socketID):
                    followups.work.append(.authorize(channel: channel, socketID: socketID))
                case .authenticateUser(let socketID):
                    followups.work.append(.authenticateUser(socketID: socketID))
                case .user(let update):
                    Self.feed(.user(update), to: &state.sinks)
                    followups.logs.append(action)
                case .connectionStateChanged(let change):
                    Self.feed(.connectionStateChanged(change), to: &state.sinks)
                    followups.logs.append(action)
                case .reconnectScheduled:
                    followups.logs.append(action)
                case .deliver(let event):
                    Self.feed(.event(event), to: &state.sinks)
                    for binding in state.bindings.values
                    where (binding.channel == nil || binding.channel == event.channel)
                        && (binding.eventName == nil || binding.eventName == event.name)
                    {
                        followups.callbacks.append((binding.callback, event))
                    }
                case .subscriptionSucceeded(let channel):
                    Self.feed(.subscriptionSucceeded(channel: channel), to: &state.sinks)
                    followups.logs.append(action)
                case .presence(let change):
                    Self.feed(.presence(change), to: &state.sinks)
                case .subscriptionFailed(let channel, let error):
                    Self.feed(.subscriptionFailed(channel: channel, error: error), to: &state.sinks)
                    followups.logs.append(action)
                case .error(let error):
                    Self.feed(.error(error), to: &state.sinks)
                    followups.logs.append(action)
                case .ignoredFrame:
                    state.ignoredFrames += 1
                    followups.logs.append(action)
                }
            }
            followups.wakeTimer = state.timer.deadlineChanged(to: state.machine.nextDeadline)
            return followups
        }
        followups.closeHandshake?.close(promise: nil)
        if followups.wakeTimer { timerWakeUpContinuation.yield() }
        for item in followups.work { workContinuation.yield(item) }
        for (callback, event) in followups.callbacks { callback(event) }
        for action in followups.logs { log(action) }
    }

    /// Yields `update` to every stream that wants it; streams whose consumer went away are removed.
    private static func feed(_ update: PusherUpdate, to sinks: inout [Int: Sink]) {
        var ended: [Int] = []
        for (id, sink) in sinks {
            let result: Bool
            switch sink {
            case .updates(let continuation):
                result = isTerminated(continuation.yield(update))
            case .batches(let batches):
                result = !batches.append(update)
            case .events(let channel, let continuation):
                guard case .event(let event) = update, channel == nil || channel == event.channel else { continue }
                result = isTerminated(continuation.yield(event))
            case .presence(let channel, let continuation):
                guard case .presence(let change) = update, channel == nil || channel == change.channel else { continue }
                result = isTerminated(continuation.yield(change))
            case .states(let continuation):
                guard case .connectionStateChanged(let change) = update else { continue }
                result = isTerminated(continuation.yield(change))
            case .errors(let continuation):
                switch update {
                case .error(let error), .subscriptionFailed(_, let error), .user(.signInFailed(let error)):
                    result = isTerminated(continuation.yield(error))
                case .event, .presence, .subscriptionSucceeded, .connectionStateChanged, .user:
                    continue
                }
            case .user(let continuation):
                guard case .user(let change) = update else { continue }
                result = isTerminated(continuation.yield(change))
            }
            if result { ended.append(id) }
        }
        for id in ended { sinks.removeValue(forKey: id) }
    }

    private static func isTerminated<T>(_ result: AsyncStream<T>.Continuation.YieldResult) -> Bool {
        if case .terminated = result { return true }
        return false
    }

    private func log(_ action: PusherConnectionStateMachine.Action) {
        switch action {
        case .connectionStateChanged(let change):
            var metadata: Logger.Metadata = ["pusher.state": "\(change.current)"]
            if let socketID = change.socketID { metadata["pusher.socket_id"] = "\(socketID)" }
            if change.current == .connected {
                logger.info("Pusher connected", metadata: metadata)
            } else {
                logger.debug("Pusher connection state changed", metadata: metadata)
            }
        case .reconnectScheduled(let delay, let attempt):
            logger.info("Pusher reconnect scheduled", metadata: ["pusher.delay": "\(delay)", "pusher.attempt": "\(attempt)"])
        case .subscriptionSucceeded(let channel):
            logger.debug("Pusher subscription succeeded", metadata: ["pusher.channel": "\(channel)"])
        case .subscriptionFailed(let channel, let error):
            logger.warning("Pusher subscription failed", metadata: ["pusher.channel": "\(channel)", "pusher.error": "\(error)"])
        case .error(let error):
            if error.isConnectionRefused || error.isGaveUp {
                logger.error("Pusher connection refused", metadata: ["pusher.error": "\(error)"])
            } else if error.isTransportFailure {
                // Every failed attempt; the application decides what to report (the daemon: one
                // rate-limited error line naming the reason).
                logger.info("Pusher connection failed", metadata: ["pusher.error": "\(error)"])
            } else {
                logger.warning("Pusher error", metadata: ["pusher.error": "\(error)"])
            }
        case .user(.signedIn(let user)):
            logger.info("Pusher signed in", metadata: ["pusher.user_id": "\(user.id)"])
        case .user(.signInFailed(let error)):
            logger.warning("Pusher sign-in failed", metadata: ["pusher.error": "\(error)"])
        case .user:
            break
        case .ignoredFrame(let event, let reason):
            logger.debug("Pusher frame ignored", metadata: ["pusher.event": "\(event)", "pusher.reason": "\(reason)"])
        case .openTransport, .closeTransport, .send, .authorize, .authenticateUser, .deliver, .presence:
            break
        }
    }
}
