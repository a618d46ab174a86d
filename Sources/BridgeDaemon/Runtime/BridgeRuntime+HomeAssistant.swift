import BridgeCore
import Locking
import MQTTVocabulary
import MosquittoClient
import Synchronization

/// The counts Home Assistant's state reads (docs/contract.md §8.3) that only the pipelines see:
/// delivered messages per direction and dead letters, counted where `messages_total` is, and the
/// cluster's gauges. Atomics, not a lock: the delivery paths count one message at a time.
final class HomeAssistantTally: Sendable {
    let deliveredToMQTT = Atomic<Int>(0)
    let deliveredToPusher = Atomic<Int>(0)
    let deadLetters = Atomic<Int>(0)
    let clusterMembers = Atomic<Int>(0)
    let channelsHeld = Atomic<Int>(0)

    func delivered(_ direction: MessageDirection) {
        switch direction {
        case .pusherToMQTT: deliveredToMQTT.add(1, ordering: .relaxed)
        case .mqttToPusher: deliveredToPusher.add(1, ordering: .relaxed)
        }
    }
}

/// Home Assistant discovery's I/O side (docs/contract.md §8.3): BridgeCore's
/// ``HomeAssistantPublisher`` decides, under the runtime's lock (``RuntimeDecisions/homeAssistant``);
/// ``runHomeAssistant()`` carries out its actions one after the other, so that a removal and a
/// later config of the same topic reach the broker in that order.
extension BridgeRuntime {
    /// Wakes ``runHomeAssistant()`` after an input may have left actions or moved the deadline.
    func homeAssistantInput(_ input: (inout HomeAssistantPublisher<ContinuousClock.Instant>, ContinuousClock.Instant) -> Void) {
        let now = ContinuousClock.now
        decisions.withLock { input(&$0.homeAssistant, now) }
        homeAssistantWake.continuation.yield()
    }

    /// A reload changed `[daemon] homeassistant` / `homeassistant_prefix`: publish or remove in place.
    func applyHomeAssistant(_ settings: HomeAssistantSettings) {
        let (current, nodeID) = decisions.withLock { ($0.homeAssistant.settings, $0.homeAssistant.device.nodeID) }
        guard current != settings else { return }
        logger.info(
            settings.enabled ? "Home Assistant discovery on" : "Home Assistant discovery off: removing its configs",
            metadata: ["homeassistant.prefix": "\(settings.prefix)", "homeassistant.node_id": "\(nodeID)"])
        homeAssistantInput { $0.settingsChanged(to: settings, now: $1) }
    }

    /// Takes Home Assistant's birth messages (`<prefix>/status`) out of a burst from the broker;
    /// returns the rest, for the rules.
    func homeAssistantMessagesTaken(from burst: [MQTTMessage]) -> [MQTTMessage] {
        let settings = decisions.withLock { $0.homeAssistant.settings }
        guard settings.enabled else { return burst }
        var rest: [MQTTMessage] = []
        rest.reserveCapacity(burst.count)
        for message in burst {
            guard message.topic == settings.birthTopic else {
                rest.append(message)
                continue
            }
            logger.debug(
                "Home Assistant status", metadata: ["mqtt.topic": "\(message.topic)", "payload_bytes": "\(message.payload.count)"])
            homeAssistantInput { $0.birthMessageReceived(payload: message.payload, now: $1) }
        }
        return rest
    }

    /// What the state JSON reports now: the connections, the buffers as `buffered_messages` counts
    /// them (outboxes plus what a `throttle` holds), and the tallies.
    private func homeAssistantReading() -> HomeAssistantReading {
        let pending = toMQTT.pending + toPusher.pending
        let (connectivity, held) = withBridge { ($0.connectivity, $0.heldMessages(.pusherToMQTT) + $0.heldMessages(.mqttToPusher)) }
        let tally = homeAssistantTally
        return HomeAssistantReading(
            mqttConnected: connectivity.mqttConnected, pusherConnected: connectivity.pusherConnected,
            deliveredToMQTT: tally.deliveredToMQTT.load(ordering: .relaxed),
            deliveredToPusher: tally.deliveredToPusher.load(ordering: .relaxed), buffered: pending + held,
            deadLetters: tally.deadLetters.load(ordering: .relaxed),
            cluster: cluster == nil
                ? nil : (tally.clusterMembers.load(ordering: .relaxed), tally.channelsHeld.load(ordering: .relaxed)))
    }

    /// Carries out the publisher's actions in order, then sleeps until its next deadline or the
    /// next input (no polling). Ends when the bridge stops.
    func runHomeAssistant() async {
        let (settings, device) = decisions.withLock { ($0.homeAssistant.settings, $0.homeAssistant.device) }
        if settings.enabled {
            logger.info(
                "Home Assistant discovery on",
                metadata: ["homeassistant.prefix": "\(settings.prefix)", "homeassistant.node_id": "\(device.nodeID)"])
        }
        var wakes = homeAssistantWake.stream.makeAsyncIterator()
        var sleeper: (deadline: ContinuousClock.Instant, task: Task<Void, Never>)?
        defer { sleeper?.task.cancel() }
        while !Task.isCancelled {
            let reading = homeAssistantReading()
            let now = ContinuousClock.now
            // Nothing while the stopping bridge's flush carries out actions: it wakes this task when done.
            let (actions, deadline) = decisions.withLock { state in
                let actions = state.homeAssistantBusy ? [] : state.homeAssistant.take(now: now, reading: reading)
                state.homeAssistantBusy = state.homeAssistantBusy || !actions.isEmpty
                return (actions, state.homeAssistant.nextDeadline)
            }
            if !actions.isEmpty {
                for action in actions { await carryOut(action) }
                homeAssistantActionsDone()
            }
            if sleeper?.deadline != deadline {
                sleeper?.task.cancel()
                sleeper = deadline.map { deadline in
                    (
                        deadline,
                        Task { [wake = homeAssistantWake.continuation] in
                            guard (try? await Task.sleep(until: deadline, tolerance: .milliseconds(10))) != nil else { return }
                            wake.yield()
                        }
                    )
                }
            }
            guard await wakes.next() != nil else { return }
        }
    }

    /// A stopping bridge publishes what is pending (a reload's removals, the state with the Pusher
    /// side down) before its `offline`; then nothing more (the MQTT client is about to shut down).
    /// Waits (until `deadline` at most) for ``runHomeAssistant()`` to finish what it took, so that
    /// none of it is cut off by the client's shutdown.
    func flushHomeAssistant(deadline: ContinuousClock.Instant) async {
        // Claim the turn (woken with `false` when the other taker is done: try again).
        var claimed = false
        while !claimed, !Task.isCancelled, ContinuousClock.now < deadline {
            claimed = await decisions.wait(
                in: { state, queue in queue(&state.homeAssistantIdleWaiters) }, deadline: deadline,
                until: { state in
                    guard !state.homeAssistantBusy else { return nil }
                    state.homeAssistantBusy = true
                    return true
                }, ifTimedOut: { _ in false }, ifCancelled: { _ in false })
        }
        guard claimed else { return }
        let reading = homeAssistantReading()
        let now = ContinuousClock.now
        let actions = decisions.withLock { $0.homeAssistant.take(now: now, reading: reading) }
        for action in actions { await carryOut(action) }
        decisions.withLock { $0.homeAssistant.mqttDisconnected() }
        homeAssistantActionsDone()
    }

    /// The actions a task took are carried out: the next taker may go on.
    private func homeAssistantActionsDone() {
        decisions.withLock { state in
            state.homeAssistantBusy = false
            return state.homeAssistantIdleWaiters.resumeAll(returning: false)
        }.resume()
        homeAssistantWake.continuation.yield()
    }

    private func carryOut(_ action: HomeAssistantPublisher<ContinuousClock.Instant>.Action) async {
        switch action {
        case .subscribe(let filter):
            let subscription = MQTTSubscription(filter, qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways)
            do { _ = try await mqtt.subscribe(subscription) } catch {
                metrics.errors(bridge: name, kind: "subscribe").increment()
                logger.error("MQTT subscribe failed", metadata: ["mqtt.topic": "\(filter)", "error": "\(error)"])
            }
        case .unsubscribe(let filter):
            do { try await mqtt.unsubscribe(filter) } catch {
                logger.warning("unsubscribe failed", metadata: ["mqtt.topic": "\(filter)", "error": "\(error)"])
            }
        case .publish(let message):
            let publish = MQTTMessage(topic: message.topic, payload: Array(message.payload.utf8), qos: .atLeastOnce, retain: true)
            do { try await mqtt.publish(publish) } catch {
                // A stopping bridge's client shuts down under a publish in flight: not an error.
                if isStopping {
                    logger.debug(
                        "Home Assistant discovery message not published while stopping", metadata: ["mqtt.topic": "\(message.topic)"])
                    return
                }
                metrics.errors(bridge: name, kind: "homeassistant").increment()
                logger.warning(
                    "Home Assistant discovery message not published", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
            }
        }
    }
}
