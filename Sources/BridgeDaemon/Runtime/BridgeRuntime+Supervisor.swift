import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient

/// The supervisor at work: events in under its one lock, its actions carried out after the lock
/// is released (``execute(_:)``), and the timer that wakes at its next deadline.
extension BridgeRuntime {
    typealias SupervisorAction = BridgeSupervisor.Action

    /// The supervisor's notion of now: the monotonic instant and the wall clock.
    static var supervisorNow: BridgeSupervisor.Now {
        BridgeSupervisor.Now(.now, millis: UTCTimestamp.now().millisecondsSince1970)
    }

    /// Runs `body` on the bridge machine under the supervisor's lock (the hot paths: routing,
    /// shaping, counters). No I/O in `body`.
    func withBridge<T: Sendable>(_ body: (inout BridgeStateMachine<ContinuousClock.Instant>) -> T) -> T {
        decisions.withLock { body(&$0.supervisor.bridge) }
    }

    /// Feeds one event to the supervisor under its lock, then carries out its actions and wakes
    /// the timer (the event may have moved the next deadline).
    func perform(_ event: (inout BridgeSupervisor, BridgeSupervisor.Now) -> [SupervisorAction]) {
        let now = Self.supervisorNow
        let actions = decisions.withLock { event(&$0.supervisor, now) }
        execute(actions)
        timerWake.continuation.yield()
    }

    /// Sleeps until the supervisor's next deadline, or until an event wakes it, then lets the
    /// supervisor do what is due. One sleeper at a time; no polling.
    func runTimer() async {
        var wakes = timerWake.stream.makeAsyncIterator()
        var sleeper: (deadline: ContinuousClock.Instant, task: Task<Void, Never>)?
        defer { sleeper?.task.cancel() }
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let deadline = decisions.withLock { $0.supervisor.nextDeadline }
            if let deadline, deadline <= now {
                perform { $0.tick($1) }
                continue
            }
            // The sleeper of an unchanged deadline goes on sleeping; another deadline gets a new one.
            if sleeper?.deadline != deadline {
                sleeper?.task.cancel()
                sleeper = deadline.map { deadline in (deadline, wakeTimer(at: deadline)) }
            }
            guard await wakes.next() != nil else { return }
        }
    }

    /// A task that wakes the timer at `deadline` (unless cancelled first).
    private func wakeTimer(at deadline: ContinuousClock.Instant) -> Task<Void, Never> {
        Task { [wake = timerWake.continuation] in
            guard (try? await Task.sleep(until: deadline, tolerance: .milliseconds(1))) != nil else { return }
            wake.yield()
        }
    }
}

extension BridgeRuntime {
    /// Carries out the supervisor's actions in order.
    func execute(_ actions: [SupervisorAction]) {
        for action in actions {
            switch action {
            case .bridge(let action):
                execute(action)
            case .channelTakenOver(let channel, let lastHeldAt):
                decisions.withLock { $0.pusherConnections.takenOver(channel, lastHeldAt: lastHeldAt) }
            case .subscribeChannel(let channel):
                // The Pusher client takes subscriptions at any time and sends them once connected; a
                // channel asked for already is left as it is (no list copy per channel: 10,000
                // configured channels made that quadratic).
                subscribeEverywhere(channel)
            case .unsubscribeChannel(let channel):
                unsubscribeEverywhere(channel)
            case .subscribeMembership(let filter):
                // On the cluster's queue, not `commands`: the record published next must go out
                // after the SUBACK, so that its echo follows the retained records (runCluster).
                let subscription = MQTTSubscription(filter, qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways)
                cluster?.outgoing.continuation.yield(.subscribe(subscription))
            case .publishMembership(let publish):
                let message = MQTTMessage(
                    topic: publish.topic, payload: publish.payload, qos: MQTTQoS(rawValue: publish.qos) ?? .atLeastOnce,
                    retain: publish.retain)
                cluster?.outgoing.continuation.yield(.message(message))
            case .clusterReport(let event):
                clusterReport(event)
            case .clusterGauges(let members, let held):
                metrics.clusterMembers(bridge: name).record(members)
                metrics.clusterChannelsHeld(bridge: name).record(held)
                homeAssistantTally.clusterMembers.store(members, ordering: .relaxed)
                homeAssistantTally.channelsHeld.store(held, ordering: .relaxed)
                homeAssistantInput { $0.clusterChanged(now: $1) }
            case .leaveCompleted:
                cluster?.leaveWake.continuation.yield()
            case .clusterEchoSuppressed:
                receivedToPusher.increment()
                metrics.messages(bridge: name, rule: "", direction: .mqttToPusher, outcome: .suppressed).increment()
            case .clusterBadMessage(let topic, let bytes, let suppressed):
                metrics.errors(bridge: name, kind: "cluster").increment()
                if let suppressed {
                    logger.warning(
                        "unreadable cluster membership message ignored",
                        metadata: ["mqtt.topic": "\(topic)", "bytes": "\(bytes)", "suppressed_logs": "\(suppressed)"])
                }
            case .poll(let rule, let prefix, let info):
                discoveryPolls.continuation.yield(DiscoveryPoll(rule: rule, prefix: prefix, info: info))
            case .countsRefused(let rule):
                logger.warning(
                    """
                    channel discovery: the server refused info=subscription_count (subscription counting not enabled?); \
                    polling without counts, channels are left after idle_timeout without events
                    """,
                    metadata: ["bridge.rule": "\(rule)"])
            case .discoveryJoined(let channel, let rule):
                logger.debug("discovered channel joined", metadata: ["pusher.channel": "\(channel)", "bridge.rule": "\(rule)"])
            case .discoveryLeft(let channel, let rule, let reason):
                logger.info(
                    "discovered channel left", metadata: ["pusher.channel": "\(channel)", "bridge.rule": "\(rule)", "reason": "\(reason)"])
            case .discoverySkipped(let rule, let count, let first, let suppressed):
                metrics.discoverySkipped(bridge: name, rule: rule).increment(by: count)
                if let suppressed {
                    logger.warning(
                        "channel discovery: max_channels reached, channels skipped",
                        metadata: [
                            "bridge.rule": "\(rule)", "skipped": "\(count)", "pusher.channel": "\(first)",
                            "suppressed_logs": "\(suppressed)",
                        ])
                }
            case .discoveryPollFailed(let rule, let prefix, let error, let retryable, let suppressed):
                metrics.errors(bridge: name, kind: "pusher_http").increment()
                if let suppressed {
                    logger.warning(
                        "channel discovery poll failed; held channels are kept",
                        metadata: [
                            "bridge.rule": "\(rule)", "pusher.channel_prefix": "\(prefix)", "error": "\(error)",
                            "retry": "\(retryable ? "with backoff" : "next interval")", "suppressed_logs": "\(suppressed)",
                        ])
                }
            case .discoveredChannels(let rule, let count):
                metrics.discoveredChannels(bridge: name, rule: rule).record(count)
            }
        }
    }
}
