import CMosquitto
import DequeModule
import Dispatch
import Foundation
import Locking
import Logging

/// How a publisher learns that its publish completed.
enum PublishCompletion: Sendable {
    /// On `MQTTClient.completions`.
    case stream
    /// By resuming the task awaiting `MQTTClient.publish`.
    case continuation(CheckedContinuation<Void, any Error>)
}

/// A task waiting for room in the in-flight window.
typealias RoomWaiter = CheckedContinuation<MQTTPublishID, any Error>
/// A task waiting for a SUBACK/UNSUBACK: granted QoS codes (empty for UNSUBACK).
typealias RequestWaiter = CheckedContinuation<[Int32], any Error>

/// A SUBSCRIBE or UNSUBSCRIBE that has not been acknowledged yet.
struct PendingRequest: Sendable {
    /// What to send.
    enum Request: Sendable {
        /// SUBSCRIBE with these options.
        case subscribe(MQTTSubscription)
        /// UNSUBSCRIBE this filter.
        case unsubscribe(String)
    }
    var request: Request
    /// `nil` for resubscriptions the client makes by itself after a reconnect.
    var waiter: RequestWaiter?
}

/// The thin owner of one libmosquitto handle and its network thread.
///
/// It decides nothing about reconnecting (that is `ConnectionStateMachine`): it runs libmosquitto
/// on its own thread with `mosquitto_loop` (never `loop_start`/`loop_forever`, whose built-in
/// reconnect is quadratic and, for MQTT 5, ends for good after a refused CONNACK — MQTT-NOTES
/// §6–7), feeds the state machine what happened and carries out its actions.
///
/// Every CONNECT goes through `mosquitto_connect_bind_v5`, because libmosquitto's reconnect
/// functions drop the CONNECT properties and an MQTT 5 session without a Session Expiry Interval
/// ends with the connection (MQTT-NOTES §4).
///
/// Locks, always taken in this order: `session` (whether publishes may enter libmosquitto, and
/// what waits for a connection), then `window` (in-flight accounting). libmosquitto callbacks run
/// on the network thread and take only `window`, `loopEvents` or the message buffer's lock —
/// never `session` — so no lock cycle with libmosquitto's internal mutexes is possible.
final class MosquittoConnection: Sendable {
    /// Publishes accepted while disconnected, sent after the next CONNACK.
    struct QueuedPublish: Sendable {
        var id: MQTTPublishID
        var message: MQTTMessage
        var completion: PublishCompletion
    }

    struct Session: Sendable {
        var started = false
        var stopRequested = false
        /// After this, nothing but the network thread may touch the handle, and it destroys it.
        var destroyed = false
        /// CONNACK accepted and not lost: publishes go straight into libmosquitto.
        var isConnected = false
        var queued: Deque<QueuedPublish> = []
        var subscriptions: [MQTTSubscription] = []
        var pendingRequests: Deque<PendingRequest> = []
        var state: MQTTConnectionState = .idle
    }

    struct Window: Sendable {
        var publishes: InFlightWindow<PublishCompletion, RoomWaiter>
        /// Stream completions collected on the network thread during one `mosquitto_loop`
        /// (kept here so an acknowledgement costs one lock).
        var deferredCompletions: [MQTTPublishCompletion] = []
        var requests = AckTable<PendingRequest, Result<[Int32], MQTTError>>()
        var nextWaiterToken: UInt64 = 1
    }

    /// What libmosquitto's connect/disconnect callbacks reported during one `mosquitto_loop`.
    enum LoopEvent: Sendable {
        case connack(code: Int32, sessionPresent: Bool)
        case disconnected(code: Int32)
    }

    struct LoopEvents: Sendable {
        var events: [LoopEvent] = []
        var lastLibraryError: String?
    }

    struct Termination: Sendable {
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    let configuration: MQTTConfiguration
    let logger: Logger
    let handle: MosquittoHandle
    let messageBuffer: MessageBuffer
    let completions: AsyncStream<MQTTPublishCompletion>
    private let completionsContinuation: AsyncStream<MQTTPublishCompletion>.Continuation
    let states: AsyncStream<MQTTConnectionState>
    private let statesContinuation: AsyncStream<MQTTConnectionState>.Continuation

    private let session = Locked(Session())
    private let window: Locked<Window>
    private let loopEvents = Locked(LoopEvents())
    private let termination = Locked(Termination())
    /// Wakes the network thread from a backoff wait (shutdown).
    private let wake = DispatchSemaphore(value: 0)

    init(configuration: MQTTConfiguration, logger: Logger) throws(MQTTError) {
        let problems = configuration.problems
        guard problems.isEmpty else {
            throw MQTTError(
                kind: .invalidConfiguration,
                message: "invalid MQTT configuration: " + problems.joined(separator: "; "))
        }
        guard mosquittoLibraryInitialised else {
            throw MQTTError(kind: .library, message: "mosquitto_lib_init failed")
        }
        guard let raw = mosquitto_new(configuration.clientID, configuration.cleanSession, nil) else {
            throw MQTTError(kind: .library, message: "mosquitto_new failed (out of memory or invalid client id)")
        }
        self.handle = MosquittoHandle(raw: raw)
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = "\(configuration.clientID)"
        self.logger = logger
        self.messageBuffer = MessageBuffer(capacity: configuration.messageBufferSize)
        self.window = Locked(Window(publishes: InFlightWindow(limit: configuration.maxInFlight)))
        (completions, completionsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (states, statesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        do {
            try Self.configure(raw, configuration)
        } catch {
            mosquitto_destroy(raw)
            throw error
        }
    }

    /// Applies the options that stay the same for every connection.
    private static func configure(_ mosq: OpaquePointer, _ configuration: MQTTConfiguration) throws(MQTTError) {
        func check(_ rc: Int32, _ what: String) throws(MQTTError) {
            guard rc == MosquittoCode.success else {
                var error = MosquittoCode.error(rc, context: what)
                error.kind = .invalidConfiguration
                throw error
            }
        }
        let level = configuration.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, level), "setting the protocol version")
        // Nagle off: at 5k msg/s it cost 31 ms at p99.9 (MQTT-NOTES §9).
        try check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "setting TCP_NODELAY")
        let window = Int32(min(configuration.maxInFlight, 65535))
        try check(mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, window), "setting the send maximum")
        try check(mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, window), "setting the receive maximum")
        // We call libmosquitto from several threads but run the loop ourselves.
        try check(mosquitto_threaded_set(mosq, true), "enabling threaded mode")
        if let username = configuration.username {
            try check(mosquitto_username_pw_set(mosq, username, configuration.password), "setting credentials")
        }
        if let tls = configuration.tls {
            // No CA given: the operating system's trust store (MQTT-NOTES §11). mosquitto_tls_set
            // needs a CA file or directory, so a client certificate without a CA uses Debian's
            // hashed store directly.
            var caDirectory = tls.caDirectory
            if tls.caFile == nil && caDirectory == nil {
                try check(mosquitto_int_option(mosq, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "using the system trust store")
                if tls.certificateFile != nil { caDirectory = "/etc/ssl/certs" }
            }
            if tls.caFile != nil || caDirectory != nil {
                try check(
                    mosquitto_tls_set(mosq, tls.caFile, caDirectory, tls.certificateFile, tls.keyFile, nil),
                    "configuring TLS (check that ca_file, cert_file and key_file exist and are readable)")
            }
            try check(mosquitto_tls_insecure_set(mosq, tls.insecure), "setting tls_insecure")
        }
        if let will = configuration.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain, nil)
            }
            try check(rc, "setting the Last Will")
        }
        mosquitto_connect_v5_callback_set(mosq) { _, context, code, flags, _ in
            guard let context else { return }
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .noteLoopEvent(.connack(code: code, sessionPresent: flags & 1 != 0))
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, context, code, _ in
            guard let context else { return }
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .noteLoopEvent(.disconnected(code: code))
        }
        mosquitto_publish_v5_callback_set(mosq) { _, context, mid, reason, _ in
            guard let context else { return }
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .publishAcknowledged(mid: mid, reason: reason)
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, context, mid, count, granted, _ in
            guard let context else { return }
            let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .requestAcknowledged(mid: mid, codes: codes)
        }
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, context, mid, _ in
            guard let context else { return }
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .requestAcknowledged(mid: mid, codes: [])
        }
        mosquitto_message_v5_callback_set(mosq) { _, context, message, properties in
            guard let context, let message else { return }
            // Copy everything now: libmosquitto frees the message when we return, and has
            // already sent the PUBACK (MQTT-NOTES §1).
            let m = message.pointee
            let topic = m.topic.map { String(cString: $0) } ?? ""
            let payload =
                m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(max(m.payloadlen, 0)))) } ?? []
            let copied = MQTTMessage(
                topic: topic, payload: payload, qos: MQTTQoS(rawValue: Int(m.qos)) ?? .atMostOnce,
                retain: m.retain, properties: MosquittoProperties.read(properties))
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue().received(copied)
        }
    }

    // MARK: - Public operations (any thread)

    /// Starts the network thread (once).
    func start() {
        let first = session.withLock { session in
            defer { session.started = true }
            return !session.started && !session.stopRequested
        }
        guard first else { return }
        // The thread holds `self` strongly until it has destroyed the handle, so the unretained
        // pointer given to libmosquitto stays valid for every callback.
        mosquitto_user_data_set(handle.raw, Unmanaged.passUnretained(self).toOpaque())
        let thread = Thread { [self] in self.networkThreadMain() }
        thread.name = "mqtt-\(configuration.clientID)"
        thread.start()
    }

    /// Asks the network thread to drain, disconnect and stop. Does not wait.
    func requestStop() {
        let finishHere = session.withLock { session in
            defer { session.stopRequested = true }
            // Without a network thread, the first stop request releases everything here.
            return !session.started && !session.stopRequested
        }
        if finishHere {
            finish(error: nil)
        } else {
            wake.signal()
        }
    }

    /// Waits until the client has stopped and released the handle.
    func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = termination.withLock { termination in
                if termination.done { return true }
                termination.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    var currentState: MQTTConnectionState { session.withLock { $0.state } }
    var inFlightCount: Int { window.withLock { $0.publishes.used } }

    /// Takes a slot in the in-flight window, waiting for one when it is full.
    func reserveSlot() async throws -> MQTTPublishID {
        if let id = window.withLock({ $0.publishes.tryReserve() }) { return id }
        let token = window.withLock { w in
            defer { w.nextWaiterToken += 1 }
            return w.nextWaiterToken
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: RoomWaiter) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                // Checked and registered under `session`, so `finish` (which marks the handle
                // destroyed under `session`, then fails all waiters) cannot miss this waiter.
                let outcome: Result<MQTTPublishID?, MQTTError> = session.withLock { session in
                    if session.destroyed { return .failure(.shutdown) }
                    return .success(window.withLock { $0.publishes.reserveOrWait(token: token, continuation) })
                }
                switch outcome {
                case .failure(let error): continuation.resume(throwing: error)
                case .success(.some(let id)): continuation.resume(returning: id)
                case .success(.none): break
                }
            }
        } onCancel: {
            window.withLock { $0.publishes.cancelWait(token: token) }?.resume(throwing: CancellationError())
        }
    }

    /// Takes a slot if one is free.
    func tryReserveSlot() -> MQTTPublishID? {
        window.withLock { $0.publishes.tryReserve() }
    }

    /// Hands a publish that owns slot `id` to libmosquitto, or queues it while disconnected.
    /// On a thrown error the slot has been released.
    func accept(_ message: MQTTMessage, id: MQTTPublishID, completion: PublishCompletion) throws(MQTTError) {
        do {
            try validate(message)
            let early: Int32? = try session.withLock { session throws(MQTTError) -> Int32? in
                if session.destroyed || session.stopRequested { throw MQTTError.shutdown }
                guard session.isConnected else {
                    guard message.qos > .atMostOnce else { throw MQTTError.notConnected }
                    // Refuse a bad topic now rather than after the reconnect.
                    guard !message.topic.isEmpty,
                        message.topic.withCString({ mosquitto_pub_topic_check($0) }) == MosquittoCode.success
                    else {
                        throw MQTTError.invalidArgument("invalid topic \"\(message.topic)\" (no wildcards, not empty)")
                    }
                    session.queued.append(QueuedPublish(id: id, message: message, completion: completion))
                    return nil
                }
                let mid = try handOver(message)
                return window.withLock { w in
                    w.publishes.publishes.bind(mid, PendingPublish(id: id, qos: message.qos, completion: completion))
                }
            }
            if let early {
                complete(PendingPublish(id: id, qos: message.qos, completion: completion), reason: early)
            }
        } catch {
            releaseSlot()
            throw error
        }
    }

    /// Subscribes (or queues the subscription until connected) and waits for the SUBACK.
    func request(_ request: PendingRequest.Request) async throws -> [Int32] {
        if case .subscribe(let subscription) = request, subscription.usesV5Options,
            configuration.protocolVersion != .v5
        {
            throw MQTTError.unsupported("no_local, retain_as_published and retain handling need MQTT 5")
        }
        // Checked now, not when a queued request is finally sent: a bad filter would otherwise
        // be remembered and fail again after every reconnect.
        let filter: String
        switch request {
        case .subscribe(let subscription): filter = subscription.filter
        case .unsubscribe(let f): filter = f
        }
        // mosquitto_sub_topic_check accepts "", which the broker answers by closing the
        // connection — and a queued request would then be re-sent after every reconnect.
        let valid =
            !filter.isEmpty && filter.utf8.count <= 65535
            && filter.withCString { mosquitto_sub_topic_check($0) } == MosquittoCode.success
        guard valid else {
            throw MQTTError.invalidArgument("invalid topic filter \"\(filter)\" (MQTT 5 §4.7: + and # only as whole levels, # last)")
        }
        return try await withCheckedThrowingContinuation { (continuation: RequestWaiter) in
            let outcome: Result<(Int32, Result<[Int32], MQTTError>?)?, MQTTError> = session.withLock { session in
                if session.destroyed || session.stopRequested { return .failure(.shutdown) }
                switch request {
                case .subscribe(let subscription):
                    session.subscriptions.removeAll { $0.filter == subscription.filter }
                    session.subscriptions.append(subscription)
                case .unsubscribe(let filter):
                    session.subscriptions.removeAll { $0.filter == filter }
                }
                let pending = PendingRequest(request: request, waiter: continuation)
                guard session.isConnected else {
                    session.pendingRequests.append(pending)
                    return .success(nil)
                }
                do throws(MQTTError) {
                    let mid = try send(request)
                    let early = window.withLock { $0.requests.bind(mid, pending) }
                    return .success((mid, early))
                } catch {
                    return .failure(error)
                }
            }
            switch outcome {
            case .failure(let error): continuation.resume(throwing: error)
            case .success(.some((_, .some(let early)))): continuation.resume(with: early.mapError { $0 as any Error })
            case .success: break
            }
        }
    }

    /// Test hook: shuts the socket down under libmosquitto's feet, as a dying network would,
    /// so the broker sees no DISCONNECT (Last Will tests).
    func dropConnectionUncleanly() {
        session.withLock { session in
            guard !session.destroyed else { return }
            let fd = mosquitto_socket(handle.raw)
            if fd >= 0 { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    // MARK: - libmosquitto calls made under `session`

    private func validate(_ message: MQTTMessage) throws(MQTTError) {
        if configuration.protocolVersion != .v5 && !message.properties.isEmpty {
            throw MQTTError.unsupported("publish properties need MQTT 5 (topic \(message.topic))")
        }
    }

    /// `mosquitto_publish_v5`; returns the message id. QoS ≥ 1 returning MOSQ_ERR_NO_CONN was
    /// queued by libmosquitto and is resent after reconnect (MQTT-NOTES §3), so it counts as handed over.
    private func handOver(_ message: MQTTMessage) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        var properties: OpaquePointer?
        defer { if properties != nil { mosquitto_property_free_all(&properties) } }
        if !message.properties.isEmpty {
            let rc = MosquittoProperties.make(message.properties, into: &properties)
            guard rc == MosquittoCode.success else {
                throw MosquittoCode.error(rc, context: "invalid publish properties for topic \(message.topic)")
            }
        }
        let rc = message.topic.withCString { topic in
            message.payload.withUnsafeBytes { payload in
                mosquitto_publish_v5(
                    handle.raw, &mid, topic, Int32(payload.count), payload.baseAddress,
                    Int32(message.qos.rawValue), message.retain, properties)
            }
        }
        if rc == MosquittoCode.success { return mid }
        if rc == MosquittoCode.noConnection {
            if message.qos > .atMostOnce { return mid }
            throw MQTTError.notConnected
        }
        throw MosquittoCode.error(rc, context: "publish to \(message.topic) failed")
    }

    private func send(_ request: PendingRequest.Request) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc: Int32
        switch request {
        case .subscribe(let subscription):
            let options = configuration.protocolVersion == .v5 ? subscriptionOptions(subscription) : 0
            rc = mosquitto_subscribe_v5(
                handle.raw, &mid, subscription.filter, Int32(subscription.qos.rawValue), options, nil)
            guard rc == MosquittoCode.success || rc == MosquittoCode.noConnection else {
                throw MosquittoCode.error(rc, context: "subscribe to \(subscription.filter) failed")
            }
        case .unsubscribe(let filter):
            rc = mosquitto_unsubscribe_v5(handle.raw, &mid, filter, nil)
            guard rc == MosquittoCode.success || rc == MosquittoCode.noConnection else {
                throw MosquittoCode.error(rc, context: "unsubscribe from \(filter) failed")
            }
        }
        return mid
    }

    // MARK: - Completions

    private func releaseSlot() {
        for (waiter, id) in window.withLock({ $0.publishes.releaseSlot() }) {
            waiter.resume(returning: id)
        }
    }

    private static func error(forReason reason: Int32, of id: MQTTPublishID) -> MQTTError? {
        reason >= 0x80 ? MosquittoCode.rejection(reason, context: "broker rejected publish \(id)") : nil
    }

    private func complete(_ pending: PendingPublish<PublishCompletion>, reason: Int32) {
        complete(pending, error: Self.error(forReason: reason, of: pending.id))
    }

    private func complete(_ pending: PendingPublish<PublishCompletion>, error: MQTTError?) {
        deliver(pending, error: error)
        releaseSlot()
    }

    /// Tells the publisher at once. (Acknowledgements on the network thread instead collect
    /// stream completions in `Window.deferredCompletions`, yielded together after the current
    /// `mosquitto_loop` by `flushCompletions`, so a consumer of `completions` wakes once per
    /// batch rather than once per acknowledgement.)
    private func deliver(_ pending: PendingPublish<PublishCompletion>, error: MQTTError?) {
        switch pending.completion {
        case .stream:
            completionsContinuation.yield(MQTTPublishCompletion(id: pending.id, qos: pending.qos, error: error))
        case .continuation(let continuation):
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }

    /// Yields the completions collected during the last `mosquitto_loop` (network thread).
    private func flushCompletions() {
        let batch = window.withLock { w in
            defer { w.deferredCompletions.removeAll(keepingCapacity: true) }
            return w.deferredCompletions
        }
        guard !batch.isEmpty else { return }
        for completion in batch { completionsContinuation.yield(completion) }
    }

    private func complete(_ request: PendingRequest, with result: Result<[Int32], MQTTError>) {
        if let waiter = request.waiter {
            waiter.resume(with: result.mapError { $0 as any Error })
        } else if case .failure(let error) = result {
            logger.error("resubscribe failed", metadata: ["mqtt.error": "\(error)"])
        }
    }

    // MARK: - libmosquitto callbacks (network thread; must return quickly)

    fileprivate func noteLoopEvent(_ event: LoopEvent) {
        loopEvents.withLock { $0.events.append(event) }
    }

    fileprivate func publishAcknowledged(mid: Int32, reason: Int32) {
        // One lock for matching the ack and freeing its slot: this runs once per message.
        let (waiter, woken) = window.withLock { w -> (PendingPublish<PublishCompletion>?, [(RoomWaiter, MQTTPublishID)]) in
            guard let pending = w.publishes.publishes.acknowledged(mid, reason) else { return (nil, []) }
            let woken = w.publishes.releaseSlot()
            guard case .stream = pending.completion else { return (pending, woken) }
            w.deferredCompletions.append(
                MQTTPublishCompletion(id: pending.id, qos: pending.qos, error: Self.error(forReason: reason, of: pending.id)))
            return (nil, woken)
        }
        if let waiter {
            deliver(waiter, error: Self.error(forReason: reason, of: waiter.id))
        }
        for (room, id) in woken { room.resume(returning: id) }
    }

    fileprivate func requestAcknowledged(mid: Int32, codes: [Int32]) {
        // SUBACK codes ≥ 0x80 are failures in both 3.1.1 (0x80) and 5 (reason codes).
        let result: Result<[Int32], MQTTError>
        if let failure = codes.first(where: { $0 >= 0x80 }) {
            result = .failure(MosquittoCode.rejection(failure, context: "broker refused the subscription"))
        } else {
            result = .success(codes)
        }
        if let request = window.withLock({ $0.requests.acknowledged(mid, result) }) {
            complete(request, with: result)
        }
    }

    fileprivate func received(_ message: MQTTMessage) {
        logger.trace("message received", metadata: ["mqtt.topic": "\(message.topic)"])
        if !messageBuffer.push(message, maxWait: configuration.backpressureTimeout) {
            let dropped = messageBuffer.droppedCount
            // Rate-limited: the 1st, 2nd, 4th, 8th … drop, then every 1000th.
            if dropped > 0 && ((dropped & (dropped - 1)) == 0 || dropped % 1000 == 0) {
                logger.error(
                    "message buffer full: consumer too slow, message dropped after it was acknowledged",
                    metadata: ["mqtt.topic": "\(message.topic)", "mqtt.dropped": "\(dropped)"])
            }
        }
    }

    // MARK: - The network thread

    private func setState(_ state: MQTTConnectionState) {
        session.withLock { $0.state = state }
        statesContinuation.yield(state)
    }

    private func networkThreadMain() {
        var machine = ConnectionStateMachine(policy: configuration.reconnect)
        var actions: Deque<ConnectionStateMachine.Action> = [machine.start()]
        var socketOpen = false
        var stopHandled = false
        var finished = false
        let random = { Double.random(in: 0...1) }

        while !finished {
            if !stopHandled, session.withLock({ $0.stopRequested }) {
                stopHandled = true
                actions.append(machine.shutdownRequested())
            }
            while let action = actions.popFirst() {
                switch action {
                case .connect(let attempt):
                    setState(.connecting(attempt: attempt))
                    logger.debug(
                        "connecting",
                        metadata: [
                            "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
                            "mqtt.attempt": "\(attempt)",
                        ])
                    if let error = openConnection() {
                        actions.append(machine.connectFailed(error, now: .now, unitRandom: random()))
                    } else {
                        socketOpen = true
                    }
                case .markConnected(let sessionPresent, let resubscribe):
                    mosquitto_log_callback_set(handle.raw, nil)
                    flushAfterConnect(resubscribe: resubscribe)
                    setState(.connected(sessionPresent: sessionPresent))
                    logger.info(
                        "connected",
                        metadata: [
                            "mqtt.host": "\(configuration.host)", "mqtt.session_present": "\(sessionPresent)",
                        ])
                case .scheduleReconnect(let delay, let error):
                    socketOpen = false
                    markDisconnected()
                    setState(.disconnected(error: error, retryIn: delay))
                    logger.warning(
                        "disconnected; reconnecting after backoff",
                        metadata: ["mqtt.error": "\(error)", "mqtt.retry_in": "\(delay)"])
                case .giveUp(let error):
                    socketOpen = false
                    markDisconnected()
                    logger.error("giving up reconnecting", metadata: ["mqtt.error": "\(error)"])
                    finish(error: error)
                    finished = true
                case .disconnect:
                    drainAndDisconnect()
                    socketOpen = false
                    actions.append(machine.disconnected())
                case .stop:
                    socketOpen = false
                    finish(error: nil)
                    finished = true
                case .none:
                    break
                }
            }
            if finished { break }

            if socketOpen {
                let rc = mosquitto_loop(handle.raw, 100, 1)
                flushCompletions()
                let events = loopEvents.withLock { state in
                    defer { state.events.removeAll() }
                    return state.events
                }
                for event in events {
                    switch event {
                    case .connack(let code, let sessionPresent):
                        if code == 0 {
                            actions.append(machine.connackAccepted(sessionPresent: sessionPresent, now: .now))
                        } else {
                            let error = MosquittoCode.connackRefusal(code, version: configuration.protocolVersion)
                            actions.append(machine.connectFailed(error, now: .now, unitRandom: random()))
                        }
                    case .disconnected(let code):
                        // A broker's DISCONNECT carries an MQTT 5 reason code (≥ 0x80); a
                        // dropped socket a libmosquitto error code.
                        let reason = String(
                            cString: code >= 0x80 ? mosquitto_reason_string(code) : mosquitto_strerror(code))
                        let error = MQTTError(
                            kind: .connectionLost,
                            message: "connection to \(configuration.host):\(configuration.port) lost: \(reason)",
                            code: Int(code))
                        actions.append(lostOrFailed(&machine, error, random()))
                    }
                }
                if rc != MosquittoCode.success {
                    let detail = loopEvents.withLock { $0.lastLibraryError }
                    let error = MosquittoCode.error(
                        rc, context: "connection to \(configuration.host):\(configuration.port) failed", detail: detail)
                    actions.append(lostOrFailed(&machine, error, random()))
                }
            } else if let deadline = machine.reconnectDeadline {
                let now = ContinuousClock.now
                if now < deadline {
                    let wait = min(now.duration(to: deadline), .seconds(1))
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(wait.seconds * 1e9)))
                }
                actions.append(machine.reconnectDue(now: .now))
            } else if actions.isEmpty && !stopHandled {
                // Nothing open and nothing scheduled (should not happen): wait for a stop request.
                _ = wake.wait(timeout: .now() + .milliseconds(100))
            }
        }
    }

    private func lostOrFailed(
        _ machine: inout ConnectionStateMachine, _ error: MQTTError, _ unitRandom: Double
    ) -> ConnectionStateMachine.Action {
        switch machine.phase {
        case .connecting: return machine.connectFailed(error, now: .now, unitRandom: unitRandom)
        default: return machine.connectionLost(error, now: .now, unitRandom: unitRandom)
        }
    }

    /// TCP (+TLS) connect and CONNECT with our properties; blocking, on the network thread.
    /// Returns the error when it failed before anything was sent.
    private func openConnection() -> MQTTError? {
        // Capture libmosquitto's error log lines while connecting: they carry OpenSSL's reason
        // for a TLS failure. Removed once connected (formatting every debug line costs throughput).
        loopEvents.withLock { $0.lastLibraryError = nil }
        mosquitto_log_callback_set(handle.raw) { _, context, level, text in
            guard let context, let text, level & Int32(MOSQ_LOG_ERR) != 0 else { return }
            let line = String(cString: text)
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue()
                .loopEvents.withLock { $0.lastLibraryError = line }
        }
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if configuration.protocolVersion == .v5 {
            // MQTT-NOTES §4: without this property an MQTT 5 session ends with the connection.
            let expiry = configuration.cleanSession ? 0 : UInt32(configuration.sessionExpiry.seconds.rounded())
            _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry)
        }
        let keepAlive = Int32(configuration.keepAlive.seconds.rounded())
        let rc = mosquitto_connect_bind_v5(
            handle.raw, configuration.host, Int32(configuration.port), keepAlive, nil, properties)
        guard rc == MosquittoCode.success else {
            let detail = loopEvents.withLock { $0.lastLibraryError }
            return MosquittoCode.error(
                rc, context: "cannot connect to \(configuration.host):\(configuration.port)", detail: detail)
        }
        return nil
    }

    /// After CONNACK: resubscribe when the broker has no session, send queued requests and
    /// publishes, then let publishes go straight through.
    private func flushAfterConnect(resubscribe: Bool) {
        var earlyPublishes: [(PendingPublish<PublishCompletion>, Int32)] = []
        var failedPublishes: [(PendingPublish<PublishCompletion>, MQTTError)] = []
        var requestResults: [(PendingRequest, Result<[Int32], MQTTError>)] = []
        session.withLock { session in
            let pendingRequests = session.pendingRequests
            session.pendingRequests.removeAll()
            if resubscribe {
                let pendingFilters = Set(
                    pendingRequests.compactMap { request -> String? in
                        if case .subscribe(let s) = request.request { return s.filter }
                        return nil
                    })
                for subscription in session.subscriptions where !pendingFilters.contains(subscription.filter) {
                    let pending = PendingRequest(request: .subscribe(subscription), waiter: nil)
                    do throws(MQTTError) {
                        let mid = try send(pending.request)
                        if let early = window.withLock({ $0.requests.bind(mid, pending) }) {
                            requestResults.append((pending, early))
                        }
                    } catch {
                        requestResults.append((pending, .failure(error)))
                    }
                }
                if !session.subscriptions.isEmpty {
                    logger.info("resubscribing: the broker had no session", metadata: ["mqtt.subscriptions": "\(session.subscriptions.count)"])
                }
            }
            for pending in pendingRequests {
                do throws(MQTTError) {
                    let mid = try send(pending.request)
                    if let early = window.withLock({ $0.requests.bind(mid, pending) }) {
                        requestResults.append((pending, early))
                    }
                } catch {
                    requestResults.append((pending, .failure(error)))
                }
            }
            while let queued = session.queued.popFirst() {
                let pending = PendingPublish(id: queued.id, qos: queued.message.qos, completion: queued.completion)
                do throws(MQTTError) {
                    let mid = try handOver(queued.message)
                    if let early = window.withLock({ $0.publishes.publishes.bind(mid, pending) }) {
                        earlyPublishes.append((pending, early))
                    }
                } catch {
                    failedPublishes.append((pending, error))
                }
            }
            session.isConnected = true
        }
        for (pending, reason) in earlyPublishes { complete(pending, reason: reason) }
        for (pending, error) in failedPublishes { complete(pending, error: error) }
        for (request, result) in requestResults { complete(request, with: result) }
    }

    /// The connection is gone: publishes queue again; QoS 0 publishes that libmosquitto had not
    /// written yet are lost (it discards them), so they fail now instead of holding their slot;
    /// unacknowledged (un)subscribes are sent again after the next CONNACK.
    private func markDisconnected() {
        let lostPublishes = session.withLock { session in
            session.isConnected = false
            let (publishes, requests) = window.withLock { w in
                (
                    w.publishes.publishes.removeAll { $0.qos == .atMostOnce },
                    w.requests.removeAll { _ in true }
                )
            }
            session.pendingRequests.insert(contentsOf: requests, at: 0)
            return publishes
        }
        let error = MQTTError(kind: .connectionLost, message: "connection lost before the QoS 0 publish was written")
        for pending in lostPublishes { complete(pending, error: error) }
    }

    /// Graceful shutdown: give outstanding acknowledgements a bounded time, then DISCONNECT
    /// (so the broker does not publish our Last Will) and wait for it to be written.
    private func drainAndDisconnect() {
        let drainDeadline = ContinuousClock.now + configuration.shutdownDrainTimeout
        while window.withLock({ $0.publishes.used }) > 0 && ContinuousClock.now < drainDeadline {
            let rc = mosquitto_loop(handle.raw, 50, 1)
            flushCompletions()
            if rc != MosquittoCode.success { break }
        }
        session.withLock { $0.isConnected = false }
        loopEvents.withLock { $0.events.removeAll() }
        guard mosquitto_disconnect_v5(handle.raw, 0, nil) == MosquittoCode.success else { return }
        let deadline = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < deadline {
            let rc = mosquitto_loop(handle.raw, 50, 1)
            flushCompletions()
            let disconnected = loopEvents.withLock { state in
                state.events.contains { if case .disconnected = $0 { return true } else { return false } }
            }
            if disconnected || rc != MosquittoCode.success { break }
        }
    }

    /// Fails everything still waiting, ends the streams, destroys the handle (network thread,
    /// or the caller of `requestStop` when the thread never started).
    private func finish(error: MQTTError?) {
        flushCompletions()
        let (queued, requests) = session.withLock { session in
            session.destroyed = true
            session.isConnected = false
            // Deques are returned as they are: `Array(emptyDeque)` writes to the shared empty-array
            // singleton, which ThreadSanitizer reports when two clients stop at once.
            let queued = session.queued
            let requests = session.pendingRequests
            session.queued.removeAll()
            session.pendingRequests.removeAll()
            return (queued, requests)
        }
        let (publishes, boundRequests, waiters) = window.withLock { w in
            (
                w.publishes.publishes.removeAll { _ in true },
                w.requests.removeAll { _ in true },
                w.publishes.removeAllWaiters()
            )
        }
        let reason = error ?? .shutdown
        for waiter in waiters { waiter.resume(throwing: reason) }
        for q in queued { complete(PendingPublish(id: q.id, qos: q.message.qos, completion: q.completion), error: reason) }
        for p in publishes { complete(p, error: reason) }
        for r in requests { r.waiter?.resume(throwing: reason) }
        for r in boundRequests { r.waiter?.resume(throwing: reason) }
        if !publishes.isEmpty || !queued.isEmpty {
            logger.warning(
                "stopped with publishes not acknowledged",
                metadata: ["mqtt.unacknowledged": "\(publishes.count + queued.count)"])
        }
        mosquitto_destroy(handle.raw)
        messageBuffer.finish()
        setState(.stopped(error: error))
        statesContinuation.finish()
        completionsContinuation.finish()
        logger.debug("stopped")
        let waiting = termination.withLock { termination in
            termination.done = true
            defer { termination.waiters.removeAll() }
            return termination.waiters
        }
        for waiter in waiting { waiter.resume() }
    }
}
