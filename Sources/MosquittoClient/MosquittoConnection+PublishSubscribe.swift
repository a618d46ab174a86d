import CMosquitto
import Logging
import MQTTVocabulary

/// Handing publishes and (un)subscribe requests to libmosquitto, matching their
/// acknowledgements, and telling the waiting tasks.
extension MosquittoConnection {
    // MARK: - Operations (any thread)

    /// Hands a publish that owns slot `id` to libmosquitto, or queues it while disconnected.
    /// On a thrown error the slot has been released.
    func accept(_ message: MQTTMessage, id: MQTTPublishID, completion: PublishCompletion) throws(MQTTError) {
        let outcome: Result<Int32?, MQTTError>
        do {
            try validate(message)
            let queued = QueuedPublish(id: id, message: message, completion: completion)
            outcome = withMachine { session in
                switch session.machine.publishRequested(queued, qos: message.qos) {
                case .handOver:
                    do throws(MQTTError) {
                        let mid = try handOver(message)
                        return .success(
                            callbacks.withLock { record in
                                record.publishes.publishes.bind(mid, PendingPublish(id: id, qos: message.qos, completion: completion))
                            })
                    } catch {
                        return .failure(error)
                    }
                case .queued:
                    return .success(nil)
                case .reject(let error):
                    return .failure(error)
                }
            }
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(.some(let early)):
            guard case .stream = completion else {
                complete(PendingPublish(id: id, qos: message.qos, completion: completion), reason: early)
                break
            }
            // Acknowledged before it was bound: libmosquitto wrote it (and the earlier publishes
            // queued before it, whose completions wait in `deferredCompletions`) on this thread,
            // inside `mosquitto_publish`. It joins them, and they go out together, in order; it
            // was delivered on its own before, ahead of them (CompletionHandlerTests).
            callbacks.withLock {
                $0.deferredCompletions.append(
                    MQTTPublishCompletion(id: id, qos: message.qos, error: Self.error(forReason: early, of: id)))
            }
            releaseSlot()
            flushCompletions()
        case .success(.none):
            break
        case .failure(let error):
            releaseSlot()
            throw error
        }
    }

    /// Subscribes or unsubscribes (queued until connected) and waits for the acknowledgement.
    func request(_ request: MQTTRequest) async throws -> [Int32] {
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
            let outcome: Result<[Int32], MQTTError>? = withMachine { session in
                let action: Machine.RequestAction
                switch request {
                case .subscribe(let subscription):
                    action = session.machine.subscribeRequested(subscription, waiter: continuation)
                case .unsubscribe(let filter):
                    action = session.machine.unsubscribeRequested(filter, waiter: continuation)
                }
                switch action {
                case .send:
                    return sendAndBind(ClientRequest(request: request, waiter: continuation))
                case .queued:
                    return nil
                case .reject(let error):
                    return .failure(error)
                }
            }
            if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
        }
    }

    // MARK: - libmosquitto calls made under `session`

    private func validate(_ message: MQTTMessage) throws(MQTTError) {
        if configuration.protocolVersion != .v5 && !message.properties.isEmpty {
            throw MQTTError.unsupported("publish properties need MQTT 5 (topic \(message.topic))")
        }
        // Refused here rather than by libmosquitto, so a publish queued during an outage fails
        // now and not after the reconnect.
        guard !message.topic.isEmpty,
            message.topic.withCString({ mosquitto_pub_topic_check($0) }) == MosquittoCode.success
        else {
            throw MQTTError.invalidArgument("invalid topic \"\(message.topic)\" (no wildcards, not empty)")
        }
    }

    /// `mosquitto_publish_v5`; returns the message id. QoS ≥ 1 returning MOSQ_ERR_NO_CONN was
    /// queued by libmosquitto and is resent after reconnect (docs/mqtt-notes.md §3), so it counts as handed over.
    func handOver(_ message: MQTTMessage) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        func publish(_ properties: OpaquePointer?) -> Int32 {
            message.topic.withCString { topic in
                message.payload.withUnsafeBytes { payload in
                    mosquitto_publish_v5(
                        handle.raw, &mid, topic, Int32(payload.count), payload.baseAddress,
                        Int32(message.qos.rawValue), message.retain, properties)
                }
            }
        }
        let rc: Int32
        if message.properties.isEmpty {
            rc = publish(nil)
        } else {
            var published = false
            let listed = propertyList.withLock { list in
                list.with(message.properties) { properties in
                    published = true
                    return publish(properties)
                }
            }
            guard published else {
                throw MosquittoCode.error(listed, context: "invalid publish properties for topic \(message.topic)")
            }
            rc = listed
        }
        if rc == MosquittoCode.success { return mid }
        if rc == MosquittoCode.noConnection {
            if message.qos > .atMostOnce { return mid }
            throw MQTTError.notConnected
        }
        throw MosquittoCode.error(rc, context: "publish to \(message.topic) failed")
    }

    /// Sends a request and binds its `mid`. Returns its result when it is already known (sending
    /// failed, or the acknowledgement came first), `nil` when the acknowledgement is awaited.
    func sendAndBind(_ pending: ClientRequest) -> Result<[Int32], MQTTError>? {
        do throws(MQTTError) {
            let mid = try send(pending.request)
            return callbacks.withLock { $0.requests.bind(mid, pending) }
        } catch {
            return .failure(error)
        }
    }

    private func send(_ request: MQTTRequest) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let rc: Int32
        switch request {
        case .subscribe(let subscription):
            if subscription.filter.hasPrefix("$share/"), !callbacks.withLock({ $0.sharedSubscriptionsAvailable }) {
                throw MosquittoCode.rejection(
                    Self.sharedSubscriptionsNotSupported,
                    context: "broker refused the subscription (its CONNACK says Shared Subscription Available = 0; not sent)")
            }
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

    /// Carries out `sendAfterConnect` (network thread, under `session`): resubscriptions, then
    /// the requests that waited, then the publishes that waited. Returns what completes at once;
    /// the caller tells the waiters after releasing the lock.
    func send(_ resend: Machine.Resend) -> AfterConnect {
        var done = AfterConnect()
        for subscription in resend.resubscriptions {
            let pending = ClientRequest(request: .subscribe(subscription), waiter: nil)
            if let result = sendAndBind(pending) { done.requests.append((pending, result)) }
        }
        for pending in resend.requests {
            if let result = sendAndBind(pending) { done.requests.append((pending, result)) }
        }
        for queued in resend.publishes {
            let pending = PendingPublish(id: queued.id, qos: queued.message.qos, completion: queued.completion)
            do throws(MQTTError) {
                let mid = try handOver(queued.message)
                if let early = callbacks.withLock({ $0.publishes.publishes.bind(mid, pending) }) {
                    done.publishes.append((pending, Self.error(forReason: early, of: pending.id)))
                }
            } catch {
                done.publishes.append((pending, error))
            }
        }
        return done
    }

    /// What completed while sending after a CONNACK.
    struct AfterConnect {
        var publishes: [(PendingPublish<PublishCompletion>, MQTTError?)] = []
        var requests: [(ClientRequest, Result<[Int32], MQTTError>)] = []
    }

    // MARK: - Completions

    func releaseSlot() {
        for (waiter, id) in callbacks.withLock({ $0.publishes.releaseSlot() }) {
            waiter.resume(returning: id)
        }
    }

    static func error(forReason reason: Int32, of id: MQTTPublishID) -> MQTTError? {
        reason >= 0x80 ? MosquittoCode.rejection(reason, context: "broker rejected publish \(id)") : nil
    }

    func complete(_ pending: PendingPublish<PublishCompletion>, reason: Int32) {
        complete(pending, error: Self.error(forReason: reason, of: pending.id))
    }

    func complete(_ pending: PendingPublish<PublishCompletion>, error: MQTTError?) {
        deliver(pending, error: error)
        releaseSlot()
    }

    /// Tells the publisher at once. (Acknowledgements on the network thread instead collect
    /// stream completions in `CallbackRecord.deferredCompletions`, yielded together after the
    /// current `mosquitto_loop` by `flushCompletions`, so a consumer of `completions` wakes once
    /// per batch rather than once per acknowledgement.)
    func deliver(_ pending: PendingPublish<PublishCompletion>, error: MQTTError?) {
        switch pending.completion {
        case .stream:
            let completion = MQTTPublishCompletion(id: pending.id, qos: pending.qos, error: error)
            if let handler = completionHandler.withLock({ $0 }) {
                handler.handle([completion])
            } else {
                completionsContinuation.yield(completion)
            }
        case .continuation(let continuation):
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }

    /// Yields the completions collected during the last `mosquitto_loop` (network thread), or
    /// with an early one (a publishing thread). One flush at a time, taking and delivering under
    /// `completionDelivery`, so two threads' batches cannot overtake each other. (The handler must
    /// not publish synchronously: it would wait for this lock.)
    func flushCompletions() {
        completionDelivery.withLock { _ in
            let batch = callbacks.withLock { record in
                defer { record.deferredCompletions.removeAll(keepingCapacity: true) }
                return record.deferredCompletions
            }
            guard !batch.isEmpty else { return }
            if let handler = completionHandler.withLock({ $0 }) {
                handler.handle(batch)
            } else {
                for completion in batch { completionsContinuation.yield(completion) }
            }
        }
    }

    func complete(_ request: ClientRequest, with result: Result<[Int32], MQTTError>) {
        if let waiter = request.waiter {
            waiter.resume(with: result.mapError { $0 as any Error })
        } else if case .failure(let error) = result {
            logger.error("resubscribe failed", metadata: ["mqtt.error": "\(error)"])
        }
    }

    // MARK: - libmosquitto callbacks (network thread; must return quickly)

    func publishAcknowledged(mid: Int32, reason: Int32) {
        // One lock for matching the ack and freeing its slot: this runs once per message.
        let (waiter, woken) = callbacks.withLock { record -> (PendingPublish<PublishCompletion>?, [(RoomWaiter, MQTTPublishID)]) in
            guard let pending = record.publishes.publishes.acknowledged(mid, reason) else { return (nil, []) }
            let woken = record.publishes.releaseSlot()
            guard case .stream = pending.completion else { return (pending, woken) }
            record.deferredCompletions.append(
                MQTTPublishCompletion(id: pending.id, qos: pending.qos, error: Self.error(forReason: reason, of: pending.id)))
            return (nil, woken)
        }
        if let waiter {
            deliver(waiter, error: Self.error(forReason: reason, of: waiter.id))
        }
        for (room, id) in woken { room.resume(returning: id) }
    }

    /// MQTT 5 reason code 0x9E, Shared Subscriptions not supported.
    static let sharedSubscriptionsNotSupported: Int32 = 0x9E

    func requestAcknowledged(mid: Int32, codes: [Int32]) {
        // SUBACK codes ≥ 0x80 are failures in both 3.1.1 (0x80) and 5 (reason codes).
        let result: Result<[Int32], MQTTError>
        if let failure = codes.first(where: { $0 >= 0x80 }) {
            result = .failure(MosquittoCode.rejection(failure, context: "broker refused the subscription"))
        } else {
            result = .success(codes)
        }
        if let request = callbacks.withLock({ $0.requests.acknowledged(mid, result) }) {
            complete(request, with: result)
        }
    }

    /// The callbacks of this file, registered by `setCallbacks`: a PUBLISH from the broker (copied,
    /// then buffered by ``received(_:)``), the broker's acknowledgement of ours
    /// (``publishAcknowledged(mid:reason:)``) and of (un)subscribe requests.
    static func setPublishSubscribeCallbacks(_ mosq: OpaquePointer) {
        mosquitto_message_v5_callback_set(mosq) { _, context, message, properties in
            guard let context, let message else { return }
            // Copy everything now: libmosquitto frees the message when we return, and has
            // already sent the PUBACK (docs/mqtt-notes.md §1).
            let m = message.pointee
            let topic = m.topic.map { String(cString: $0) } ?? ""
            let payload =
                m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(max(m.payloadlen, 0)))) } ?? []
            let copied = MQTTMessage(
                topic: topic, payload: payload, qos: MQTTQoS(rawValue: Int(m.qos)) ?? .atMostOnce,
                retain: m.retain, properties: MosquittoProperties.read(properties))
            Unmanaged<MosquittoConnection>.fromOpaque(context).takeUnretainedValue().received(copied)
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
    }

    func received(_ message: MQTTMessage) {
        logger.trace("message received", metadata: ["mqtt.topic": "\(message.topic)"])
        let policy = messageBuffer.policy.policy
        if policy.overflow == .pauseReading {
            // Never dropped: the network thread stops reading above the high-water mark instead
            // (`IncomingFlowControl`); a finished buffer means the client is being destroyed.
            _ = messageBuffer.append(message)
            return
        }
        if !messageBuffer.push(message, maxWait: policy.backpressureTimeout) {
            let dropped = messageBuffer.droppedCount
            // Rate-limited: the 1st, 2nd, 4th, 8th … drop, then every 1000th.
            if dropped > 0 && ((dropped & (dropped - 1)) == 0 || dropped % 1000 == 0) {
                logger.error(
                    "message buffer full: consumer too slow, message dropped after it was acknowledged",
                    metadata: ["mqtt.topic": "\(message.topic)", "mqtt.dropped": "\(dropped)"])
            }
        }
    }
}
