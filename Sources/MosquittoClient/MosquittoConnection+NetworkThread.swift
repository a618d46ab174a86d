import CMosquitto
import DequeModule
import Dispatch
import Logging
import MQTTVocabulary

#if canImport(FoundationEssentials)
    import FoundationEssentials
    import Glibc
#else
    import Foundation
#endif

/// The network thread: libmosquitto's callbacks, the loop that feeds the session machine what
/// happened, and connecting, draining and releasing the handle.
extension MosquittoConnection {
    /// How long one `mosquitto_loop` pass may block while connected. The pass returns at once on
    /// socket activity, and on any packet another thread queues (libmosquitto wakes its own
    /// `select` then); this bound is only how late a stop request is noticed, because
    /// libmosquitto offers no other way to interrupt the loop from outside.
    static let loopPassTimeoutMilliseconds: Int32 = 100

    /// How long one pass waits for the socket to take our writes while reading is paused (or,
    /// with nothing to write, how often the buffer level and a stop request are looked at).
    static let pausedPassMilliseconds: Int32 = 20

    /// How long to wait for our DISCONNECT to be written on shutdown.
    static let disconnectTimeout: Duration = .seconds(1)

    // MARK: - libmosquitto callbacks (network thread; must return quickly)

    /// Registers the callbacks; each finds its connection through the handle's user data.
    static func setCallbacks(_ mosq: OpaquePointer) {
        mosquitto_connect_v5_callback_set(mosq) { _, context, code, flags, properties in
            guard let context else { return }
            var shared: UInt8 = 1
            _ = mosquitto_property_read_byte(properties, Int32(MQTT_PROP_SHARED_SUB_AVAILABLE.rawValue), &shared, false)
            let connection = Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
            connection.callbacks.withLock {
                $0.sharedSubscriptionsAvailable = code != 0 || shared != 0
                $0.loopEvents.append(.connack(code: code, sessionPresent: flags & 1 != 0))
            }
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, context, code, _ in
            guard let context else { return }
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .noteLoopEvent(.disconnected(code: code))
        }
        setPublishSubscribeCallbacks(mosq)
    }

    private func noteLoopEvent(_ event: LoopEvent) {
        callbacks.withLock { $0.loopEvents.append(event) }
    }

    /// The broker address the current (or next) attempt uses (`MQTTConfiguration.brokers`).
    var currentBroker: MQTTBrokerAddress {
        configuration.brokers[withMachine { $0.machine.broker } % configuration.brokers.count]
    }

    // MARK: - The thread

    func networkThreadMain() {
        var actions: Deque<Machine.NetworkAction> = [withMachine { $0.machine.networkThreadStarted(now: .now) }]
        var socketOpen = false
        // Decides when to stop reading (`pauseReading` only): docs/contract.md §7.6. Built anew
        // when the buffer's policy changes (`MQTTClient.applyIncomingFlow(of:)`).
        var flow = IncomingFlow()
        while true {
            while let action = actions.popFirst() {
                switch action {
                case .connect(let attempt):
                    let broker = currentBroker
                    logger.debug(
                        "connecting",
                        metadata: ["mqtt.host": "\(broker.host)", "mqtt.port": "\(broker.port)", "mqtt.attempt": "\(attempt)"])
                    if let error = openConnection(to: broker) {
                        actions.append(withMachine { $0.machine.connectFailed(error, now: .now, unitRandom: random()) })
                    } else {
                        socketOpen = true
                    }
                case .sendAfterConnect(let resend):
                    // Sent under `session` by `connackAccepted`; here only the log.
                    if !resend.resubscriptions.isEmpty {
                        logger.info(
                            "resubscribing: the broker had no session",
                            metadata: ["mqtt.subscriptions": "\(resend.resubscriptions.count)"])
                    }
                    let broker = currentBroker
                    logger.info(
                        "connected",
                        metadata: [
                            "mqtt.host": "\(broker.host)", "mqtt.port": "\(broker.port)",
                            "mqtt.session_present": "\(resend.sessionPresent)",
                        ])
                case .scheduleReconnect(_, let delay, let error):
                    socketOpen = false
                    // Every failed attempt, hence info; the application reports the failure
                    // from the `.disconnected` state (the daemon: one rate-limited error line).
                    logger.info(
                        "disconnected; reconnecting after backoff",
                        metadata: ["mqtt.error": "\(error)", "mqtt.retry_in": "\(delay)"])
                case .keepWaiting:
                    break
                case .drainAndDisconnect(let deadline):
                    drainAndDisconnect(until: deadline, readingPaused: flow.isPaused)
                    socketOpen = false
                    actions.append(withMachine { $0.machine.disconnectCompleted(now: .now) })
                case .release(let release):
                    if let error = release.error {
                        logger.error("giving up reconnecting", metadata: ["mqtt.error": "\(error)"])
                    }
                    self.release(release)
                    return
                case .none:
                    break
                }
            }

            if socketOpen {
                observeBufferLevel(&flow)
                runLoopPass(readingPaused: flow.isPaused, into: &actions)
            } else if let deadline = session.withLock({ $0.machine.reconnectDeadline }) {
                sleep(until: deadline)
                holdReconnectWhilePaused(&flow)
                actions.append(withMachine { $0.machine.backoffElapsed(now: .now) })
            } else {
                // Nothing open and nothing scheduled: only a stop request can come, and it wakes us.
                wake.wait()
                actions.append(withMachine { $0.machine.backoffElapsed(now: .now) })
            }
        }
    }

    private func random() -> Double { Double.random(in: 0...1) }

    /// Sleeps until `deadline`, or until `requestStop` signals `wake`.
    private func sleep(until deadline: ContinuousClock.Instant) {
        _ = wake.wait(until: deadline)
    }

    /// Reports the incoming buffer's level to `flow` (built anew first if the policy changed) and logs a change.
    private func observeBufferLevel(_ flow: inout IncomingFlow) {
        let (policy, version) = messageBuffer.policy
        if version != flow.version {
            if flow.isPaused { logger.debug("incoming buffer policy changed: reading from the broker resumed") }
            flow.version = version
            flow.control =
                policy.overflow == .pauseReading ? IncomingFlowControl(capacity: policy.capacity, byteCapacity: policy.byteCapacity) : nil
        }
        guard var control = flow.control else { return }
        let (messages, bytes) = messageBuffer.level
        let change = control.bufferLevelObserved(.init(messages: messages, bytes: bytes), now: .now)
        flow.control = control
        switch change {
        case .paused(let level):
            logger.debug(
                "incoming buffer full: reading from the broker paused",
                metadata: ["mqtt.buffered": "\(level.messages)", "mqtt.buffered_bytes": "\(level.bytes)"])
        case .resumed(let after):
            // Short pauses come and go with every burst; a long one is worth a line.
            logger.log(
                level: after >= .seconds(1) ? .notice : .debug, "reading from the broker resumed",
                metadata: ["mqtt.paused_for": "\(after)"])
        case nil:
            break
        }
    }

    /// While reading is paused the connection is not opened again: the broker keeps the
    /// messages in the session until there is room (or a stop request ends the wait).
    private func holdReconnectWhilePaused(_ flow: inout IncomingFlow) {
        observeBufferLevel(&flow)
        guard !flow.mayReconnect else { return }
        logger.notice("not reconnecting until the incoming buffer drains; the broker keeps the messages in the session")
        while !flow.mayReconnect, !session.withLock({ $0.machine.isStopping }) {
            _ = wake.wait(timeout: .now() + .milliseconds(Int(Self.pausedPassMilliseconds)))
            observeBufferLevel(&flow)
        }
    }

    /// A pass while reading is paused: write what waits (our publishes, PINGREQ) and run
    /// libmosquitto's keep-alive check, but read nothing, so TCP holds the broker back. The
    /// keep-alive check closes the connection once nothing was read for 2 × keep-alive
    /// (`MOSQ_ERR_KEEPALIVE`, reported through the disconnect callback).
    private func runPausedPass() -> Int32 {
        let raw = handle.raw
        let fd = mosquitto_socket(raw)
        if fd >= 0, mosquitto_want_write(raw) {
            var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&descriptor, 1, Self.pausedPassMilliseconds) > 0 {
                let rc = mosquitto_loop_write(raw, 1)
                if rc != MosquittoCode.success { return rc }
            }
        } else {
            // Woken early by a stop request; `loopPassCompleted` then takes it.
            _ = wake.wait(timeout: .now() + .milliseconds(Int(Self.pausedPassMilliseconds)))
        }
        return mosquitto_loop_misc(raw)
    }

    /// One `mosquitto_loop` pass (or a paused pass); feeds the machine what the callbacks saw.
    private func runLoopPass(readingPaused: Bool, into actions: inout Deque<Machine.NetworkAction>) {
        let rc = readingPaused ? runPausedPass() : mosquitto_loop(handle.raw, Self.loopPassTimeoutMilliseconds, 1)
        flushCompletions()
        let events = callbacks.withLock { record in
            defer { record.loopEvents.removeAll() }
            return record.loopEvents
        }
        for event in events {
            switch event {
            case .connack(let code, let sessionPresent):
                if code == 0 {
                    actions.append(connackAccepted(sessionPresent: sessionPresent))
                } else {
                    let error = MosquittoCode.connackRefusal(code, version: configuration.protocolVersion)
                    actions.append(withMachine { $0.machine.connectFailed(error, now: .now, unitRandom: random()) })
                }
            case .disconnected(let code):
                // A broker's DISCONNECT carries an MQTT 5 reason code (≥ 0x80); a
                // dropped socket a libmosquitto error code.
                // libmosquitto 2.0.11 has no text for its keep-alive close (code 19, MOSQ_ERR_KEEPALIVE).
                let reason =
                    code == MosquittoCode.keepAliveExpired
                    ? "keep-alive timeout (nothing read for 2 × keepalive)"
                    : String(cString: code >= 0x80 ? mosquitto_reason_string(code) : mosquitto_strerror(code))
                let error = MQTTError(
                    kind: .connectionLost,
                    message: "connection to \(currentBroker) lost: \(reason)",
                    code: Int(code))
                actions.append(connectionLost(error))
            }
        }
        if rc != MosquittoCode.success {
            let detail = callbacks.withLock { $0.lastLibraryError }
            let error = MosquittoCode.error(
                rc, context: "connection to \(currentBroker) failed", detail: detail)
            actions.append(connectionLost(error))
        }
        actions.append(withMachine { $0.machine.loopPassCompleted(now: .now) })
    }

    /// CONNACK accepted: the machine says what to send, and it is sent before `session` is
    /// released, so no publish accepted meanwhile overtakes the ones that waited.
    private func connackAccepted(sessionPresent: Bool) -> Machine.NetworkAction {
        mosquitto_log_callback_set(handle.raw, nil)
        let (action, done) = withMachine { session -> (Machine.NetworkAction, AfterConnect) in
            let action = session.machine.connectSucceeded(sessionPresent: sessionPresent, now: .now)
            switch action {
            case .sendAfterConnect(let resend):
                return (action, send(resend))
            case .connect, .scheduleReconnect, .keepWaiting, .drainAndDisconnect, .release, .none:
                return (action, AfterConnect())
            }
        }
        for (pending, error) in done.publishes { complete(pending, error: error) }
        for (request, result) in done.requests { complete(request, with: result) }
        return action
    }

    /// The connection is gone. libmosquitto discards QoS 0 publishes it had not written yet, so
    /// they fail now instead of holding their slot; unacknowledged (un)subscribes go back to the
    /// machine, which sends them again after the next CONNACK. Both under `session`, so no
    /// request can be sent in between and be forgotten.
    private func connectionLost(_ error: MQTTError) -> Machine.NetworkAction {
        let (action, lostPublishes) = withMachine { session in
            let (lost, unacknowledged) = callbacks.withLock { record in
                (
                    record.publishes.publishes.removeAll { $0.qos == .atMostOnce },
                    record.requests.removeAll { _ in true }
                )
            }
            let action = session.machine.connectionLost(
                error, unacknowledged: unacknowledged, now: .now, unitRandom: random())
            return (action, lost)
        }
        let lost = MQTTError(kind: .connectionLost, message: "connection lost before the QoS 0 publish was written")
        for pending in lostPublishes { complete(pending, error: lost) }
        return action
    }

    /// TCP (+TLS) connect and CONNECT with our properties; blocking, on the network thread.
    /// Returns the error when it failed before anything was sent.
    private func openConnection(to broker: MQTTBrokerAddress) -> MQTTError? {
        // Capture libmosquitto's error log lines while connecting: they carry OpenSSL's reason
        // for a TLS failure. Removed once connected (formatting every debug line costs throughput).
        callbacks.withLock { $0.lastLibraryError = nil }
        mosquitto_log_callback_set(handle.raw) { _, context, level, text in
            guard let context, let text, level & Int32(MOSQ_LOG_ERR) != 0 else { return }
            let line = String(cString: text)
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .callbacks.withLock { $0.lastLibraryError = line }
        }
        var properties = connectProperties()
        defer { mosquitto_property_free_all(&properties) }
        let keepAlive = Int32(configuration.keepAlive.seconds.rounded())
        let rc = mosquitto_connect_bind_v5(handle.raw, broker.host, Int32(broker.port), keepAlive, nil, properties)
        guard rc == MosquittoCode.success else {
            let detail = callbacks.withLock { $0.lastLibraryError }
            return MosquittoCode.error(rc, context: "cannot connect to \(broker)", detail: detail)
        }
        return nil
    }

    /// Graceful shutdown: give outstanding acknowledgements until `deadline`, then DISCONNECT
    /// (so the broker does not publish our Last Will) and wait for it to be written. Each
    /// `mosquitto_loop` blocks until socket activity or the deadline, never a fixed tick.
    /// While reading is paused nothing is read: no acknowledgement is waited for (what is
    /// unacknowledged stays with the caller, the bridge's spool) and DISCONNECT is only written.
    private func drainAndDisconnect(until deadline: ContinuousClock.Instant, readingPaused: Bool) {
        while !readingPaused, callbacks.withLock({ $0.publishes.used }) > 0 {
            guard let timeout = Self.milliseconds(until: deadline) else { break }
            let rc = mosquitto_loop(handle.raw, timeout, 1)
            flushCompletions()
            if rc != MosquittoCode.success { break }
        }
        callbacks.withLock { $0.loopEvents.removeAll() }
        guard mosquitto_disconnect_v5(handle.raw, 0, nil) == MosquittoCode.success else { return }
        let disconnectDeadline = ContinuousClock.now + Self.disconnectTimeout
        while let timeout = Self.milliseconds(until: disconnectDeadline) {
            let rc = readingPaused ? runPausedPass() : mosquitto_loop(handle.raw, timeout, 1)
            flushCompletions()
            let disconnected = callbacks.withLock { record in
                record.loopEvents.contains { if case .disconnected = $0 { return true } else { return false } }
            }
            if disconnected || rc != MosquittoCode.success { break }
        }
    }

    /// Whole milliseconds from now to `deadline` (at least 1), or `nil` once it has passed.
    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32? {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return nil }
        let (seconds, attoseconds) = left.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(milliseconds, 1))
    }

    /// Fails everything still waiting, destroys the handle and ends the streams (network thread,
    /// or the caller of `requestStop` when the thread never started).
    func release(_ release: Machine.Release) {
        flushCompletions()
        let (publishes, boundRequests, waiters) = callbacks.withLock { record in
            (
                record.publishes.publishes.removeAll { _ in true },
                record.requests.removeAll { _ in true },
                record.publishes.removeAllWaiters()
            )
        }
        let reason = release.error ?? .shutdown
        for waiter in waiters { waiter.resume(throwing: reason) }
        for q in release.publishes {
            complete(PendingPublish(id: q.id, qos: q.message.qos, completion: q.completion), error: reason)
        }
        for p in publishes { complete(p, error: reason) }
        for r in release.requests { r.waiter?.resume(throwing: reason) }
        for r in boundRequests { r.waiter?.resume(throwing: reason) }
        if !publishes.isEmpty || !release.publishes.isEmpty {
            logger.warning(
                "stopped with publishes not acknowledged",
                metadata: ["mqtt.unacknowledged": "\(publishes.count + release.publishes.count)"])
        }
        mosquitto_destroy(handle.raw)
        messageBuffer.finish()
        let stopWaiters = withMachine { session in
            session.machine.handleDestroyed()
            return session.stopWaiters.resumeAll(returning: ())
        }
        statesContinuation.finish()
        completionHandler.withLock { $0 = nil }
        completionsContinuation.finish()
        logger.debug("stopped")
        stopWaiters.resume()
    }
}
