import BridgeCore
import MQTTVocabulary
import MosquittoClient
import PusherChannels
import PusherProtocol

/// Pusher → MQTT: the Pusher client's updates through the machine into the outbox, the outbox to
/// the broker, and the broker's acknowledgements back to the outbox.
extension BridgeRuntime {
    /// Takes the Pusher client's updates in batches (everything that arrived since the last look):
    /// a run of events is routed under one lock and handed to the outbox together; anything else
    /// one at a time, in order. Each run's actions are carried out before the next update is looked at.
    ///
    /// With more than one connection each connection has a consumer, and the merge decides which
    /// copy goes out under the supervisor's lock; the publishes reach the outbox after that lock.
    /// So a batch is taken, decided and handed to the outbox under ``pusherInbound``: the outbox
    /// gets the events in the order they were decided (without it, one consumer could decide an
    /// event, lose the CPU, and the other hand the next one to the outbox first — found under load
    /// by the e2e test of issue 28).
    ///
    /// `batches` is the client's ``PusherClient/updateBatches()``, taken by the connection's runner
    /// before the client connects; the runner finishes it to end this task once what arrived is in
    /// (a replaced connection's last events are not dropped).
    func consumePusher(_ batches: PusherUpdateBatches, connection: Int) async {
        // Ended here too (not only by a cancelled wait), so the client stops queueing for us.
        defer { batches.finish() }
        var actions: [Action] = []
        let merging = pusherSlots.count > 1
        while let batch = await batches.next() {
            if Task.isCancelled { break }
            if merging {
                pusherInbound.withLock { _ in take(batch, connection: connection, actions: &actions) }
            } else {
                take(batch, connection: connection, actions: &actions)
            }
        }
    }

    /// One batch of updates: runs of events routed together, anything else one at a time, each
    /// run's actions carried out before the next.
    private func take(_ batch: [PusherUpdate], connection: Int, actions: inout [Action]) {
        var index = batch.startIndex
        while index < batch.endIndex {
            var end = index
            while end < batch.endIndex, case .event = batch[end] { end += 1 }
            if end > index {
                routeEvents(batch[index..<end], connection: connection, into: &actions)
                index = end
            } else {
                handleUpdate(batch[index], connection: connection, into: &actions)
                index += 1
            }
            executeBatched(actions)
            actions.removeAll(keepingCapacity: true)
        }
    }

    /// Events, in order, under one lock of the supervisor: with more than one connection through
    /// the merge first (docs/pusher-merge.md) — a copy another connection delivered first, or an
    /// echo of the bridge's own publish, is counted and goes no further; a first copy held after a
    /// join waits, and held ones the merge releases go first. What goes on is seen by discovery
    /// (any event keeps its channel from idling), then routed by the bridge machine;
    /// `pusher:subscription_count` events carry a count for discovery.
    private func routeEvents(_ updates: ArraySlice<PusherUpdate>, connection: Int, into actions: inout [Action]) {
        let receivedAt = UTCTimestamp.now()
        let now = BridgeSupervisor.Now(.now, millis: receivedAt.millisecondsSince1970)
        let merging = pusherSlots.count > 1
        let coverageNow = PusherConnectionSet.Now(now.instant, wall: receivedAt)
        var counted: [SupervisorAction] = []
        decisions.withLock { state in
            for update in updates {
                guard case .event(let event) = update, let channel = event.channel else { continue }
                guard merging else {
                    Self.route(
                        channel: channel, name: event.name, data: event.data, userID: event.userID, receivedAt: receivedAt,
                        in: &state, now: now, counted: &counted, into: &actions)
                    continue
                }
                let arrived = PusherConnectionSet.ArrivedEvent(
                    name: event.name, data: event.data, userID: event.userID, receivedAt: receivedAt)
                let (verdict, publish) = state.pusherConnections.deliver(
                    arrived, channel: channel, connection: connection, now: coverageNow)
                if verdict == .duplicate || verdict == .ownEcho {
                    // Counted like an unmatched message: once, with no rule (docs/pusher-merge.md).
                    actions.append(.received(.pusherToMQTT, by: 1))
                    let outcome: MessageOutcome = verdict == .duplicate ? .duplicate : .suppressed
                    actions.append(.count(rule: "", direction: .pusherToMQTT, outcome: outcome, by: 1))
                }
                Self.route(publish, in: &state, now: now, counted: &counted, into: &actions)
            }
        }
        guard !counted.isEmpty else { return }
        execute(counted)
        timerWake.continuation.yield()
    }

    /// Merged events on to discovery and the bridge machine, in order (under the supervisor's lock).
    static func route(
        _ events: [(channel: String, event: PusherConnectionSet.ArrivedEvent)], in state: inout RuntimeDecisions,
        now: BridgeSupervisor.Now, counted: inout [SupervisorAction], into actions: inout [Action]
    ) {
        for (channel, event) in events {
            route(
                channel: channel, name: event.name, data: event.data, userID: event.userID, receivedAt: event.receivedAt,
                in: &state, now: now, counted: &counted, into: &actions)
        }
    }

    /// One event on to discovery (a `pusher:subscription_count` read as if the bridge were one
    /// subscriber: with one connection, as it came) and the bridge machine.
    private static func route(
        channel: String, name: String, data: String?, userID: String?, receivedAt: UTCTimestamp,
        in state: inout RuntimeDecisions, now: BridgeSupervisor.Now, counted: inout [SupervisorAction], into actions: inout [Action]
    ) {
        var count = name == "pusher:subscription_count" ? subscriptionCount(data) : nil
        if let seen = count { count = state.pusherConnections.subscriptionCountAsOneSubscriber(seen, on: channel) }
        counted += state.supervisor.pusherEventSeen(on: channel, subscriptionCount: count, now)
        state.supervisor.bridge.pusherEventReceived(
            channel: channel, event: name, data: data ?? "", userID: userID, receivedAt: receivedAt, now: now.instant,
            into: &actions)
    }

    /// Any update but an event.
    private func handleUpdate(_ update: PusherUpdate, connection: Int, into actions: inout [Action]) {
        switch update {
        case .event:
            routeEvents([update], connection: connection, into: &actions)
        case .presence(let change):
            pusherPresenceChanged(change, connection: connection)
        case .subscriptionSucceeded(let channel):
            // The signed-in user's own channel is the session's, not one the bridge holds: no
            // coverage, no gap records; the users mirror merges its events (docs/contract.md §8.2).
            guard UserID.ofServerToUserChannel(channel) == nil else {
                perform { supervisor, now in
                    supervisor.userChannelLive(connection: connection, now)
                    return []
                }
                return
            }
            pusherSubscribed(channel, connection: connection)
        case .subscriptionFailed(let channel, let error):
            guard UserID.ofServerToUserChannel(channel) == nil else {
                metrics.errors(bridge: name, kind: "pusher_sign_in").increment()
                logger.warning(
                    "events to the bridge's user cannot be received", metadata: ["error": "\(error)"].merging(tag(connection)) { $1 })
                return
            }
            pusherSubscriptionFailed(channel, connection: connection, error: error)
        case .connectionStateChanged(let change):
            if change.current != .connected, change.previous == .connected { pusherUserSignedOut(connection: connection) }
            pusherConnectionChanged(change, connection: connection)
        case .error(let error):
            metrics.errors(bridge: name, kind: "pusher").increment()
            if error.isTransportFailure {
                reportConnectionFailure(.pusher, error: error.description)
            } else {
                logger.warning("pusher error", metadata: ["error": "\(error)"].merging(tag(connection)) { $1 })
            }
        case .user(let update):
            pusherUserUpdate(update, connection: connection)
        }
    }

    /// Carries out `actions` like `execute(_:)`, handing consecutive messages for MQTT to the
    /// outbox together (one lock, one spool write); counters may run ahead of them, anything
    /// else waits for them, so the order of effects is kept.
    func executeBatched(_ actions: [Action]) {
        var publishes: [OutgoingMQTT] = []
        func flush() {
            guard !publishes.isEmpty else { return }
            let admissions = toMQTT.append(contentsOf: publishes)
            for (item, admission) in zip(publishes, admissions) {
                account(admission, rule: item.publish.rule, direction: .pusherToMQTT)
            }
            publishes.removeAll(keepingCapacity: true)
        }
        for action in actions {
            switch action {
            case .enqueueToMQTT(let publish, let receivedAt):
                publishes.append(OutgoingMQTT(publish: publish, receivedAtMillis: receivedAt))
            case .received, .count:
                execute(action)
            case .enqueueToPusher, .logDeadLetter, .keepDeadLetter, .logDropped, .connectionChanged, .publishStatus, .subscribeChannel,
                .unsubscribeChannel, .subscribeTopicFilter, .unsubscribeTopicFilter, .shapingHeld, .shapingTargetsFull:
                flush()
                execute(action)
            }
        }
        flush()
    }

    /// Publishes the outbox to MQTT while connected; acknowledgements arrive on `completions`.
    func sendToMQTT() async {
        let v5 = connection.mqtt.protocolVersion == .v5
        let marker = clusterMarker
        // `[bridge.mqtt] drain_rate` (docs/contract.md §8.3): what was received before the start, or
        // before the broker came back, leaves at most at that rate; live messages are not held.
        var pacer = connection.mqtt.drainRate.map {
            DrainPacer(ratePerSecond: $0, startedAtMillis: UTCTimestamp.now().millisecondsSince1970)
        }
        var states = decisions.withLock { $0.mqttStates }
        while !Task.isCancelled {
            let batch = await toMQTT.next(max: 256)
            if batch.isEmpty { return }
            if pacer != nil {
                // The broker connection changed since the last batch (it went away and came back):
                // what was received until now is a backlog.
                let now = decisions.withLock { $0.mqttStates }
                if now != states, mqttUp.isOpen {
                    states = now
                    pacer?.resumed(atMillis: UTCTimestamp.now().millisecondsSince1970)
                }
            }
            for entry in batch {
                if pacer != nil, !mqttUp.isOpen {
                    // Paced: the backlog waits here (in the outbox and its spool), not in the MQTT
                    // client's queue, which would send it all at once when the broker is back.
                    await mqttUp.waitUntilOpen()
                    if Task.isCancelled { return }
                    states = decisions.withLock { $0.mqttStates }
                    pacer?.resumed(atMillis: UTCTimestamp.now().millisecondsSince1970)
                }
                if var paced = pacer {
                    let wait = paced.admit(
                        backlog: paced.isBacklog(receivedAtMillis: entry.item.receivedAtMillis) ? 1 : 0, now: .now)
                    pacer = paced
                    if wait > .zero { try? await Task.sleep(for: wait) }
                }
                let publish = entry.item.publish
                let properties = MQTTPublishProperties(
                    userProperties: !v5 ? [] : marker.isEmpty ? publish.userProperties : publish.userProperties + marker)
                let message = MQTTMessage(
                    topic: publish.topic, payload: publish.payload, qos: MQTTQoS(rawValue: publish.qos) ?? .atLeastOnce,
                    retain: publish.retain, properties: properties)
                if !v5 {
                    let now = ContinuousClock.now
                    withBridge { $0.publishing(topic: publish.topic, payload: publish.payload, now: now) }
                }
                var waited = false
                let result = await send(message, topic: publish.topic, waited: &waited)
                // This publish waited for the broker to come back: what was received until now is a backlog.
                if waited, pacer != nil {
                    states = decisions.withLock { $0.mqttStates }
                    pacer?.resumed(atMillis: UTCTimestamp.now().millisecondsSince1970)
                }
                switch result {
                case .sent(let id):
                    if let early = decisions.withLock({ $0.correlation.sent(entry, id: id) }) { complete(entry, with: early) }
                case .refused:
                    continue
                case .shutDown:
                    // The rest stays in the backlog for the next start.
                    return
                }
            }
        }
    }

    private enum SendResult {
        case sent(MQTTPublishID)
        /// The client refused this publish (logged, counted): it stays for the next start.
        case refused
        case shutDown
    }

    /// Hands one publish to the client. A QoS 0 publish is refused while disconnected (it would be
    /// lost): it waits for the connection and goes again, in order.
    private func send(_ message: MQTTMessage, topic: String, waited: inout Bool) async -> SendResult {
        while !Task.isCancelled {
            let states = decisions.withLock { $0.mqttStates }
            do {
                return .sent(try await handOver(message))
            } catch let error as MQTTError where error.kind == .notConnected {
                waited = true
                if mqttUp.isOpen {
                    // The state stream has not told us of the disconnect yet: wait for its next state.
                    await nextMQTTState(after: states)
                } else {
                    await mqttUp.waitUntilOpen()
                }
            } catch let error as MQTTError where error.kind == .shutdown {
                return .shutDown
            } catch {
                metrics.errors(bridge: name, kind: "mqtt_publish").increment()
                logger.warning("MQTT publish refused; kept for the next start", metadata: ["mqtt.topic": "\(topic)", "error": "\(error)"])
                return .refused
            }
        }
        return .shutDown
    }

    /// Returns once the state watcher has taken in an MQTT state after the `seen`-th (at once if it
    /// has), or the task is cancelled.
    private func nextMQTTState(after seen: UInt64) async {
        await decisions.wait(
            in: { state, queue in queue(&state.mqttStateWaiters) }, until: { $0.mqttStates == seen ? nil : () },
            ifCancelled: { _ in () })
    }

    /// Takes the client's publish outcomes: in batches on its network thread (no task wake-up per
    /// acknowledgement), and from the stream those that completed before the handler was set. Returns
    /// when the client shut down.
    /// `mqtt.send`, without waiting while the in-flight window has room (the common case): no
    /// suspension point per message.
    private func handOver(_ message: MQTTMessage) async throws -> MQTTPublishID {
        switch Result(catching: { () throws(MQTTError) in try mqtt.trySend(message) }) {
        case .success(let id):
            return id
        case .failure(let error) where error.kind == .inFlightLimitReached:
            return try await mqtt.send(message)
        case .failure(let error):
            throw error
        }
    }

    func collectMQTTCompletions() async {
        mqtt.handleCompletions { [weak self] batch in self?.completed(batch) }
        for await completion in mqtt.completions { completed([completion]) }
    }

    /// Outcomes of publishes from the outbox, in order: paired with their entries under one lock,
    /// the delivered ones acknowledged in the outbox under one lock.
    func completed(_ completions: [MQTTPublishCompletion]) {
        let pairs = decisions.withLock { state in
            completions.compactMap { completion in state.correlation.completed(completion.id, with: completion).map { ($0, completion) } }
        }
        complete(pairs)
    }

    /// The broker acknowledged (or the client gave up on) one publish from the outbox.
    func complete(_ entry: OutboxEntry<OutgoingMQTT>, with completion: MQTTPublishCompletion) {
        complete([(entry, completion)])
    }

    /// The broker acknowledged (or the client gave up on) these publishes from the outbox.
    private func complete(_ pairs: [(OutboxEntry<OutgoingMQTT>, MQTTPublishCompletion)]) {
        var delivered: [OutboxEntry<OutgoingMQTT>] = []
        delivered.reserveCapacity(pairs.count)
        for (entry, completion) in pairs {
            if let error = completion.error {
                metrics.errors(bridge: name, kind: "mqtt_publish").increment()
                logger.warning(
                    "MQTT publish failed; kept for the next start",
                    metadata: ["mqtt.topic": "\(entry.item.publish.topic)", "error": "\(error)"])
            } else {
                delivered.append(entry)
            }
        }
        guard !delivered.isEmpty else { return }
        let pending = toMQTT.acknowledge(contentsOf: delivered)
        let now = UTCTimestamp.now().millisecondsSince1970
        for (entry, wasPending) in zip(delivered, pending) {
            // An entry the overflow policy dropped while in flight was counted `dropped` already.
            guard wasPending else { continue }
            metrics.messages(bridge: name, rule: entry.item.publish.rule, direction: .pusherToMQTT, outcome: .delivered).increment()
            homeAssistantTally.delivered(.pusherToMQTT)
            metrics.recordDelivery(.milliseconds(max(0, now - entry.item.receivedAtMillis)))
        }
    }
}
