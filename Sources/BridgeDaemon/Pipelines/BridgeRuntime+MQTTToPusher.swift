import BridgeCore
import MosquittoClient
import PusherChannels
import PusherProtocol

/// MQTT → Pusher: messages in bursts through the machine into the outbox, the outbox to `api_lanes`
/// lanes (one batch in flight per channel), each sending `batch_events` of up to 10 with
/// ``PusherBatchDelivery``'s decisions.
/// A 403 from Pusher pauses every lane (``PusherDeliveryPause``) until a batch goes through.
extension BridgeRuntime {
    /// Why MQTT → Pusher delivery is paused (Pusher answered 403), nil while it runs: `/readyz` and STATUS=.
    var pusherDeliveryPauseReason: String? { pusherPause.reason }

    /// Takes messages in bursts (up to 64 already received): one lock for the machine, and the
    /// burst's events reach the outbox, and its spool, with one lock and one write. With the
    /// `backpressure` policy a burst waits for room in the outbox.
    func consumeMQTT() async {
        var actions: [Action] = []
        var events: [OutgoingPusher] = []
        while true {
            let arrived = await mqtt.messages.next(max: 64)
            if arrived.isEmpty { return }
            // Membership messages and Home Assistant's birth messages are not for the rules.
            let burst = homeAssistantMessagesTaken(from: clusterMessagesTaken(from: arrived))
            let receivedAt = UTCTimestamp.now()
            // Read per burst: a reload may change the policy in place (BridgeRuntime.applyRules).
            if toPusher.overflow == .backpressure {
                // Wait for room instead of dropping; meanwhile the MQTT client's buffer fills and it
                // stops reading from the broker (docs/contract.md §7.6). Before routing, so that what
                // the machine counts as received reaches the outbox at once (the counter identity);
                // the estimate (payload bytes) may let one burst exceed the limits a little.
                await toPusher.waitForRoom(messages: burst.count, bytes: burst.reduce(0) { $0 + $1.payload.count })
            }
            let now = ContinuousClock.now
            decisions.withLock { state in
                for message in burst {
                    state.supervisor.bridge.mqttMessageReceived(
                        topic: message.topic, payload: message.payload, qos: Int(message.qos.rawValue), retain: message.retain,
                        receivedAt: receivedAt, now: now, into: &actions)
                }
                // `mqtt_to_pusher = "partition"` (BridgeSupervisor+Partition.swift): a replay first,
                // then the events this member sends. Only this task appends them, so a replay and
                // the newer events of its channel reach the outbox in order; a replay that a
                // membership change made due waits at most for the next burst, which the member's
                // own heartbeat brings back from the broker every `heartbeat_interval`.
                state.supervisor.partitionMQTTToPusher(&actions, now: now)
            }
            enqueueToPusher(&actions, &events)
        }
    }

    /// Carries out routed actions: the events go to the outbox with one append, the rest one by one.
    /// Leaves both arrays empty.
    func enqueueToPusher(_ actions: inout [Action], _ events: inout [OutgoingPusher]) {
        for action in actions {
            if case .enqueueToPusher(let event, let receivedAtMillis) = action {
                events.append(OutgoingPusher(event: event, receivedAtMillis: receivedAtMillis))
            } else {
                execute(action)
            }
        }
        actions.removeAll(keepingCapacity: true)
        guard !events.isEmpty else { return }
        for (admission, event) in zip(toPusher.append(contentsOf: events), events) {
            account(admission, rule: event.event.rule, direction: .mqttToPusher)
        }
        events.removeAll(keepingCapacity: true)
    }

    /// Hands the outbox to the `api_lanes` lanes (docs/contract.md §5.2): each free lane sends the
    /// events of a channel that has no batch in flight, up to 10 per `batch_events`, so a channel's
    /// events stay in order and a request leaves as soon as a lane is free.
    func sendToPusher() async {
        let lanes = connection.pusher.apiLanes
        let queue = LaneQueue<OutboxEntry<OutgoingPusher>>(
            capacity: Self.waitingPerLane * lanes, byteCapacity: Self.waitingBytesPerLane * lanes,
            size: { $0.item.event.data.utf8.count })
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<lanes {
                group.addTask { await self.deliver(queue) }
            }
            while !Task.isCancelled {
                let batch = await toPusher.next(max: 100)
                if batch.isEmpty { break }
                // False only when stopping: what was not taken stays in the backlog.
                _ = await queue.push(batch.lazy.map { (element: $0, channel: $0.item.event.channel) })
            }
            queue.finish()
            // Lanes held by a 403 pause look again: stopping, they keep their batch for the next start.
            pusherPause.wakeAll()
        }
    }

    /// How many events may wait for a lane, per lane (taken from the outbox, not sent yet).
    static let waitingPerLane = 200
    /// How many bytes of event data may wait for a lane, per lane. What waits here is a second copy
    /// of what the outbox holds; with large events the read-ahead stays at about three batches a
    /// lane (8 KB events: 32, not 200), small ones are bounded by the count (docs/history/benchmarks.md, "Memory").
    static let waitingBytesPerLane = 256 * 1024

    private func deliver(_ queue: LaneQueue<OutboxEntry<OutgoingPusher>>) async {
        var delivery = PusherBatchDelivery(policy: connection.reconnect)
        let pause = pusherPause
        let stopping = { self.withBridge { $0.isStopping } && queue.isFinished }
        while true {
            let taken = await queue.pop(max: PusherLimits.batchSize)
            let batch = taken.elements
            if batch.isEmpty { return }
            // Its channels' next events may go out once this batch is done with, on any lane.
            defer { queue.finished(taken) }
            delivery.startBatch()
            // While another lane's batch is refused, wait for it (or the cap) before trying this one.
            await pause.waitWhilePaused(upTo: connection.reconnect.maxDelay, stop: stopping)
            await paceDrain(batch)
            var failed = false
            retrying: while true {
                let result = await send(batch)
                switch delivery.attemptFinished(result, stopping: stopping(), unitRandom: Double.random(in: 0...1)) {
                case .delivered:
                    // Pusher is back after failures: what was received until now is a backlog (`drain_rate`).
                    if failed { drainResumed() }
                    delivered(batch, pause: pause)
                case .deadLetter(let reason):
                    deadLetter(batch, reason: reason)
                case .keepForNextStart:
                    metrics.errors(bridge: name, kind: "pusher_http").increment()
                case .retry(let delay, _, let reason):
                    failed = true
                    metrics.errors(bridge: name, kind: "pusher_http").increment()
                    logger.warning(
                        "Pusher HTTP API failed; retrying",
                        metadata: ["error": "\(reason)", "retry_in": "\(delay)", "events": "\(batch.count)"])
                    try? await Task.sleep(for: delay)
                    if Task.isCancelled { return }
                    continue retrying
                case .pause(let delay, let reason):
                    failed = true
                    metrics.errors(bridge: name, kind: "pusher_http").increment()
                    if pause.refused(reason: reason, now: .now) == .paused {
                        logger.error(
                            "MQTT→Pusher paused: Pusher refused the app; buffering, retrying at the backoff cap",
                            metadata: ["reason": "\(reason)", "retry_every": "\(delay)", "buffered": "\(toPusher.pending)"])
                    }
                    await pause.waitWhilePaused(upTo: delay, stop: stopping)
                    if Task.isCancelled { return }
                    continue retrying
                }
                break
            }
        }
    }

    /// `drain_rate` (docs/contract.md §8.3): the batch's backlog events wait their turn; live ones
    /// (received after delivery last resumed) do not.
    private func paceDrain(_ batch: [OutboxEntry<OutgoingPusher>]) async {
        let now = ContinuousClock.now
        let wait = decisions.withLock { state -> Duration in
            guard var pacer = state.drainToPusher else { return .zero }
            let backlog = batch.count { pacer.isBacklog(receivedAtMillis: $0.item.receivedAtMillis) }
            defer { state.drainToPusher = pacer }
            return pacer.admit(backlog: backlog, now: now)
        }
        if wait > .zero { try? await Task.sleep(for: wait) }
    }

    private func drainResumed() {
        let millis = UTCTimestamp.now().millisecondsSince1970
        decisions.withLock { $0.drainToPusher?.resumed(atMillis: millis) }
    }

    private func delivered(_ batch: [OutboxEntry<OutgoingPusher>], pause: PusherDeliveryPause) {
        if case .resumed(let after) = pause.accepted(now: .now) {
            logger.notice("MQTT→Pusher resumed: Pusher accepts events again", metadata: ["paused_for": "\(after)"])
        }
        let now = UTCTimestamp.now().millisecondsSince1970
        for entry in batch {
            // An entry the overflow policy dropped while in flight was counted `dropped` already.
            guard toPusher.acknowledge(entry) else { continue }
            metrics.messages(bridge: name, rule: entry.item.event.rule, direction: .mqttToPusher, outcome: .delivered).increment()
            homeAssistantTally.delivered(.mqttToPusher)
            metrics.recordDelivery(.milliseconds(max(0, now - entry.item.receivedAtMillis)))
        }
    }

    private func deadLetter(_ batch: [OutboxEntry<OutgoingPusher>], reason: DeadLetterReason) {
        let now = ContinuousClock.now
        var actions: [Action] = []
        // Before the acknowledgement wakes a redrive waiting for these: it then counts them dead-lettered.
        deadLetters.rejected(batch.map(\.sequence))
        // An entry the overflow policy dropped while in flight was counted `dropped` already.
        let pending = batch.filter { toPusher.acknowledge($0) }
        withBridge { machine in
            for entry in pending {
                let event = entry.item.event
                let letter = DeadLetter(
                    rule: event.rule, reason: reason, source: .pusher(channel: event.channel, event: event.event),
                    payload: Array(event.data.utf8))
                machine.deadLettered(
                    letter, direction: .mqttToPusher, receivedAtMillis: entry.item.receivedAtMillis, now: now, into: &actions)
            }
        }
        execute(actions)
    }

    /// One attempt at a batch: client events on our WebSocket, messages to users in calls of
    /// their own, the rest in `batch_events` requests — in the batch's order.
    private func send(_ batch: [OutboxEntry<OutgoingPusher>]) async -> PusherBatchAttempt {
        let own = pusherSocket
        let socketID = own?.socketID
        var httpEvents: [PusherBatchEvent] = []
        // In a cluster the holder's socket_id: Pusher then does not send the event back through it.
        // Looked up once per run of one channel (a batch is mostly one channel), not per event.
        var holderSocket: (channel: String, socketID: String?)?
        for entry in batch {
            let event = entry.item.event
            if let userID = UserID.ofServerToUserChannel(event.channel) {
                // `to_user`, `terminate_user` (docs/contract.md §8.2): what came before goes first.
                let before = await sendHTTP(httpEvents, own: own, socketID: socketID)
                guard case .accepted = before else { return before }
                httpEvents.removeAll()
                let attempt = await sendToUser(event, userID: userID)
                guard case .accepted = attempt else { return attempt }
                continue
            }
            switch event.via {
            case .clientEvent:
                // Client events need our own subscribed connection (docs/pusher-protocol.md §1, "Client events").
                do {
                    try triggerClientEvent(channel: event.channel, event: event.event, data: event.data)
                } catch {
                    return .clientEventFailed("client event on \(event.channel): \(error)")
                }
            case .http:
                if holderSocket?.channel != event.channel {
                    holderSocket = (event.channel, clusterSocketID(for: event.channel, own: socketID))
                }
                httpEvents.append(
                    PusherBatchEvent(channel: event.channel, name: event.event, data: event.data, socketID: holderSocket?.socketID))
            }
        }
        return await sendHTTP(httpEvents, own: own, socketID: socketID)
    }

    /// `batch_events` with `httpEvents` (nothing to do when empty).
    private func sendHTTP(_ httpEvents: [PusherBatchEvent], own: (connection: Int, socketID: String)?, socketID: String?) async
        -> PusherBatchAttempt
    {
        guard !httpEvents.isEmpty else { return .accepted }
        guard let rest else { return .unsendable(status: 0, body: "no app_id/secret for the HTTP API") }
        if pusherSlots.count > 1 {
            // Our other connections receive these: their copies are echoes (docs/pusher-merge.md).
            let now = Self.coverageNow
            decisions.withLock { state in
                for event in httpEvents {
                    let sentOn = event.socketID != nil && event.socketID == socketID ? own?.connection : nil
                    let key = PusherEventKey(name: event.name, data: event.data, userID: nil)
                    state.pusherConnections.ownEvent(channel: event.channel, key: key, sentOn: sentOn, now: now)
                }
            }
        }
        do {
            _ = try await rest.triggerBatch(httpEvents)
            return .accepted
        } catch {
            return PusherBatchAttempt(error)
        }
    }

    /// A `to_user` event (`sendToUser`) or a `terminate_user` (`terminateUserConnections`).
    private func sendToUser(_ event: PusherEventPublish, userID: String) async -> PusherBatchAttempt {
        guard let rest else { return .unsendable(status: 0, body: "no app_id/secret for the HTTP API") }
        do {
            if event.terminatesUser {
                try await rest.terminateUserConnections(userID)
            } else {
                try await rest.sendToUser(userID, event: event.event, data: event.data)
            }
            return .accepted
        } catch {
            return PusherBatchAttempt(error)
        }
    }
}

extension PusherBatchAttempt {
    /// How the HTTP client's error reads for ``PusherBatchDelivery``: an answer from Pusher keeps
    /// its status and body (the core decides from them: retry, pause on 403, dead letter), no answer
    /// is a network error, and a request refused before sending cannot be sent as it is.
    init(_ error: PusherHTTPError) {
        if let status = error.status, let body = error.body {
            self = .status(status, body: body)
        } else if error.isRetryable {
            self = .networkError(error.description)
        } else {
            self = .unsendable(status: error.status ?? 0, body: error.body ?? error.message)
        }
    }
}
