import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient

/// The connections' side of a bridge: MQTT states into the machine, the commands that await a
/// client, and the housekeeping loop.
extension BridgeRuntime {
    func watchMQTTStates() async {
        for await state in mqtt.states {
            let connected: Bool
            let description: String
            var sessionPresent = false
            switch state {
            case .idle: (connected, description) = (false, "idle")
            case .connecting: (connected, description) = (false, "connecting")
            case .connected(let present):
                (connected, description, sessionPresent) = (true, "connected", present)
                mqttSessionConnected()
            case .disconnected(let error, _):
                (connected, description) = (false, "disconnected")
                reportConnectionFailure(.mqtt, error: "\(error)")
                mqttSessionDisconnected(error)
            case .stopped(let error):
                (connected, description) = (false, "stopped")
                if let error { logger.error("MQTT gave up", metadata: ["error": "\(error)"]) }
            }
            mqttUp.set(open: connected)
            decisions.withLock { state in
                state.mqttStates &+= 1
                return state.mqttStateWaiters.resumeAll(returning: ())
            }.resume()
            if connected { logger.info("mqtt connected", metadata: ["mqtt.session_present": "\(sessionPresent)"]) }
            homeAssistantInput { connected ? $0.mqttConnected(now: $1) : $0.mqttDisconnected() }
            perform { $0.mqttConnectionChanged(to: description, connected: connected, $1) }
        }
    }

    /// Carries out the commands that await a client, each in a child task of its own so that a
    /// subscription waiting for the broker holds up nothing else. Ends when the bridge stops.
    func runCommands() async {
        await withDiscardingTaskGroup { group in
            for await command in commands.stream {
                group.addTask { await self.carryOut(command) }
            }
        }
    }

    private func carryOut(_ command: Action) async {
        switch command {
        case .subscribeTopicFilter(let subscription):
            await subscribeTopicFilter(subscription)
        case .unsubscribeTopicFilter(let filter):
            // A filter no longer wanted (a reload) is no longer a refusal to report.
            decisions.withLock { _ = $0.refusedSharedSubscriptions.removeValue(forKey: filter) }
            do { try await mqtt.unsubscribe(filter) } catch {
                logger.warning("unsubscribe failed", metadata: ["mqtt.topic": "\(filter)", "error": "\(error)"])
            }
        case .publishStatus(let topic, let payload):
            let message = MQTTMessage(topic: topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)
            do { try await mqtt.publish(message) } catch {
                logger.debug("status not published", metadata: ["error": "\(error)", "status": "\(payload)"])
            }
        case .enqueueToMQTT, .enqueueToPusher, .count, .logDeadLetter, .keepDeadLetter, .logDropped, .connectionChanged, .subscribeChannel,
            .unsubscribeChannel, .shapingHeld, .shapingTargetsFull, .received:
            execute(command)
        }
    }

    /// Subscribes and waits for the SUBACK; a refusal is logged, counted and, for a shared
    /// subscription the broker refuses, named by `/readyz` until granted.
    func subscribeTopicFilter(_ subscription: MQTTSubscription) async {
        do {
            _ = try await mqtt.subscribe(subscription)
            decisions.withLock { _ = $0.refusedSharedSubscriptions.removeValue(forKey: subscription.filter) }
        } catch {
            metrics.errors(bridge: name, kind: "subscribe").increment()
            if let refusal = SharedSubscriptionRefusal(filter: subscription.filter, error: error) {
                decisions.withLock { $0.refusedSharedSubscriptions[subscription.filter] = refusal }
                logger.error(
                    "MQTT refused the shared subscription: \(refusal.advice)",
                    metadata: [
                        "mqtt.topic": "\(subscription.filter)", "mqtt.reason_code": "\(refusal.reasonCodeText)",
                        "error": "\(refusal.reason)",
                    ])
            } else {
                logger.error("MQTT subscribe failed", metadata: ["mqtt.topic": "\(subscription.filter)", "error": "\(error)"])
            }
        }
    }

    /// Why `/readyz` fails while the broker refuses a shared subscription (SharedSubscriptionRefusal.swift).
    var sharedSubscriptionProblems: [String] {
        decisions.withLock { $0.refusedSharedSubscriptions.values.map(\.readinessProblem).sorted() }
    }

    /// Spool syncs (about once a second, at the supervisor's deadline), gauges, and the heartbeat
    /// the watchdog checks.
    func housekeeping() async {
        var nextLastHeldWrite = ContinuousClock.now
        var lastHeldFailing = false
        while !Task.isCancelled {
            let now = ContinuousClock.now
            if lastHeldFile != nil, now >= nextLastHeldWrite {
                // Every 5 s: a restart's gap is reported from at most 5 s before the process ended.
                nextLastHeldWrite = now + .seconds(5)
                let problem = writeLastHeld()
                if let problem, !lastHeldFailing { logger.warning("cannot write the last-held file", metadata: ["error": "\(problem)"]) }
                lastHeldFailing = problem != nil
            }
            let (outToMQTT, outToPusher) = (toMQTT.pendingSize, toPusher.pendingSize)
            // The watchdog's heartbeat; the supervisor says when the next round is due (about a
            // second) and whether a drained backlog's memory should go back to the system.
            let (next, releaseMemory) = decisions.withLock {
                (
                    $0.supervisor.housekept(now: now),
                    $0.supervisor.backlogMeasured(
                        outToMQTT.messages + outToPusher.messages, bytes: outToMQTT.bytes + outToPusher.bytes, now: now)
                )
            }
            if releaseMemory { FreeMemory.giveBack(logger: logger) }
            expirePusherMerge()
            await toMQTT.sync()
            await toPusher.sync()
            deadLetters.sync()
            // A degraded spool counts as a spool error each second (docs/contract.md §7.6).
            for degraded in [toMQTT.spoolDegraded, toPusher.spoolDegraded] where degraded {
                metrics.errors(bridge: name, kind: "spool").increment()
            }
            // What a `throttle` holds waits in the bridge too (the identity of docs/contract.md §7.6),
            // and so does what the cluster's partition keeps.
            let held = decisions.withLock { state in
                let bridge = state.supervisor.bridge
                return (bridge.heldMessages(.pusherToMQTT), bridge.heldMessages(.mqttToPusher) + state.supervisor.partitionHeld)
            }
            metrics.buffered(bridge: name, direction: .pusherToMQTT).record(toMQTT.pending + held.0)
            metrics.buffered(bridge: name, direction: .mqttToPusher).record(toPusher.pending + held.1)
            metrics.spoolDegraded(bridge: name, direction: .pusherToMQTT).record(toMQTT.spoolDegraded ? 1 : 0)
            metrics.spoolDegraded(bridge: name, direction: .mqttToPusher).record(toPusher.spoolDegraded ? 1 : 0)
            for (rule, count) in withBridge({ $0.shapingTargetCounts }) {
                metrics.throttleTargets(bridge: name, rule: rule).record(count)
            }
            try? await Task.sleep(until: next)
        }
    }
}
