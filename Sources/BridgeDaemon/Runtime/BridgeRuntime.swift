import BridgeCore
import CoreMetrics
import Durability
import Locking
import Logging
import MosquittoClient
import PusherChannels
import ServiceLifecycle

/// What the daemon shows of a bridge: both connections and the buffers (STATUS=, `/readyz`).
struct BridgeStatus: Sendable, Equatable {
    var connectivity = BridgeConnectivity()
    var buffered = 0
    /// Messages held in memory only because a spool is degraded, by direction (none: absent).
    var memoryOnly: [MessageDirection: Int] = [:]
}

/// One bridge at work: a Pusher client and an MQTT client wired through the bridge's state
/// machine, with an outbox (buffer + spool) per direction.
///
/// This type decides nothing: BridgeCore's ``BridgeSupervisor`` does (the bridge machine: routing,
/// presence mirrors, loop prevention, redelivery, readiness, rate-limited logs, reload; channel
/// discovery; the cluster), and ``PusherBatchDelivery`` decides retries and dead letters for the
/// HTTP API. The runtime feeds them what happened and carries out the actions they return
/// (``perform(_:)``, ``execute(_:)``).
///
/// Tasks, all children of ``run()`` (docs/architecture.md):
/// - the two clients' own loops;
/// - the Pusher consumer (BridgeRuntime+PusherToMQTT.swift): updates → machine → outbox;
/// - the MQTT sender and the completion collector: outbox → broker, acknowledgements → outbox;
/// - the MQTT consumer and the Pusher senders (BridgeRuntime+MQTTToPusher.swift): messages in
///   bursts → machine → outbox → lanes by channel → `batch_events`;
/// - the MQTT state watcher, the command runner (subscribe, unsubscribe, status publishes) and
///   the housekeeping loop (BridgeRuntime+Connections.swift);
/// - the supervisor's timer (BridgeRuntime+Supervisor.swift), the discovery polls and the cluster's
///   publisher;
/// - the graceful-shutdown watcher, which drains the bridge when the service group stops.
final class BridgeRuntime: Service, Sendable {
    let name: String
    let daemon: DaemonSettings
    let metrics: BridgeMetrics
    let logger: Logger
    /// The bridge's Pusher connections (`[bridge.pusher] connections`, 1 to 3), each holding every
    /// channel the bridge holds (``RuntimeDecisions/pusherConnections`` merges them), and its HTTP
    /// API client: replaced in place by a reload that changes `[bridge.pusher]`.
    let pusherSlots: PusherSlots
    /// Held by a Pusher consumer (with more than one connection) from taking a batch until its
    /// publishes are in the outbox, and by housekeeping around the merge's expiry: the outbox gets
    /// merged events in the order the merge decided them. Before `decisions` and an outbox's lock.
    let pusherInbound = Locked(())
    let mqtt: MQTTClient
    let toMQTT: Outbox<OutgoingMQTT>
    let toPusher: Outbox<OutgoingPusher>
    /// The connection-level settings the bridge started with (a change restarts the bridge).
    let connection: BridgeSettings
    /// The decisions (BridgeRuntime+Supervisor.swift): BridgeCore's ``BridgeSupervisor`` — the
    /// bridge machine, discovery, the cluster, webhooks, the 403 pause, stopping — with the session
    /// takeover detector, the publish correlation and the tasks waiting for a decision
    /// (``RuntimeDecisions``). The runtime's one lock for them.
    ///
    /// Lock order: this lock is a leaf. While it is held no other lock is taken — not an outbox's,
    /// a lane queue's, the connection gate's, a client's or the metrics' — and nothing is awaited,
    /// no I/O is done and no continuation is resumed: a closure under it only calls the pure
    /// machine or parks a waiter, and what it returns is carried out once the lock is released.
    /// No lock is held across an ``Outbox`` call.
    let decisions: Locked<RuntimeDecisions>
    /// Wakes the supervisor's timer (``runTimer()``) when an event may have moved its next deadline.
    let timerWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    /// Discovery polls the supervisor asked for, run by ``runDiscovery()``.
    let discoveryPolls = AsyncStream.makeStream(of: DiscoveryPoll.self)
    /// Open while the MQTT connection is up (a QoS 0 publish waits for it).
    let mqttUp = ConnectionGate()
    /// Commands that await the clients (subscribe, unsubscribe, status): run by ``runCommands()``.
    let commands = AsyncStream.makeStream(of: BridgeStateMachine<ContinuousClock.Instant>.Action.self)
    private let finished = AsyncStream.makeStream(of: Void.self)
    /// `received_total` of each direction, counted per message: kept instead of looked up.
    let receivedToMQTT: CoreMetrics.Counter
    let receivedToPusher: CoreMetrics.Counter
    /// The 403 pause shared by the MQTT → Pusher lanes (docs/contract.md §7.3).
    let pusherPause: PusherDeliveryPause
    /// The cluster's publishes (docs/contract.md §7.4, BridgeRuntime+Cluster.swift): `nil` without `[bridge.cluster]`.
    let cluster: BridgeCluster?
    /// When each channel was last held, kept in the state directory for the gap a restart leaves
    /// (docs/pusher-merge.md): `nil` when the bridge keeps nothing on disk (`persist = false`).
    let lastHeldFile: LastHeldFile?
    /// The bridge's kept dead letters (docs/contract.md §8.3), redriven by BridgeRuntime+Redrive.swift.
    let deadLetters: DeadLetterKeeper
    /// Home Assistant discovery (BridgeRuntime+HomeAssistant.swift): what its state counts, and
    /// the wake-up of its publisher task.
    let homeAssistantTally = HomeAssistantTally()
    let homeAssistantWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    typealias Action = BridgeStateMachine<ContinuousClock.Instant>.Action

    /// - Parameter countsRecoveredAsReceived: true when this process starts the bridge for the first
    ///   time: the messages recovered from its spools are then arrivals of this process in
    ///   `received_total` (docs/contract.md §7.6), so that the counters balance after a restart.
    ///   False when a reload restarts a running bridge: its buffer was counted already.
    init(
        settings: BridgeSettings, daemon: DaemonSettings, metrics: BridgeMetrics, logger: Logger,
        countsRecoveredAsReceived: Bool = true
    ) throws {
        name = settings.name
        connection = settings
        self.daemon = daemon
        self.metrics = metrics
        self.logger = logger
        let options = try ClientSettings.pusherOptions(settings)
        let clients = (0..<max(1, settings.pusher.connections)).map { connection in
            Self.makePusherClient(options: options, logger: Self.connectionLogger(logger, connection, of: settings.pusher.connections))
        }
        let rest = try ClientSettings.restClient(settings, logger: logger)
        var incarnation = ""
        for _ in 0..<8 { incarnation += String(UInt8.random(in: 0...255), radix: 16).leftPadded(to: 2) }
        let supervisor = BridgeSupervisor(
            settings: settings, incarnation: incarnation, startedAt: UTCTimestamp.now().millisecondsSince1970)
        let stateDirectory = settings.effectiveStateDirectory(daemonStateDirectory: daemon.stateDirectory)
        lastHeldFile = settings.buffer.persist ? LastHeldFile(stateDirectory: stateDirectory, bridge: settings.name) : nil
        let lastHeld = lastHeldFile?.read() ?? (times: [:], badLines: 0)
        if lastHeld.badLines > 0 {
            metrics.errors(bridge: settings.name, kind: "state").increment(by: lastHeld.badLines)
            logger.warning(
                "lines of the last-held file not understood: their channels report no restart gap",
                metadata: ["file": "\(lastHeldFile?.path ?? "")", "lines": "\(lastHeld.badLines)"])
        }
        let decisions = Locked(
            RuntimeDecisions(
                supervisor: supervisor,
                homeAssistant: daemon.homeAssistant,
                pusherSlots: PusherSlotsState(clients: clients, rest: rest),
                pusherConnections: PusherConnectionSet(connections: settings.pusher.connections, lastHeld: lastHeld.times),
                drainToPusher: settings.pusher.drainRate.map {
                    DrainPacer(ratePerSecond: $0, startedAtMillis: UTCTimestamp.now().millisecondsSince1970)
                }))
        self.decisions = decisions
        pusherSlots = PusherSlots(decisions: decisions, count: clients.count)
        pusherPause = PusherDeliveryPause(decisions: decisions)
        cluster = supervisor.cluster.map { BridgeCluster(settings: $0.settings, marker: $0.marker) }
        mqtt = try ClientSettings.mqttClient(
            settings, willUserProperties: supervisor.cluster?.willUserProperties ?? [], logger: logger)
        let limits = BufferLimits(maxMessages: settings.buffer.maxMessages, maxBytes: settings.buffer.maxBytes)
        func spool(_ direction: MessageDirection) -> String? {
            guard settings.buffer.persist else { return nil }
            // In a cluster `<state_dir>/<instance>`: members sharing a state_dir never share a spool.
            let stateDirectory = settings.effectiveStateDirectory(daemonStateDirectory: daemon.stateDirectory)
            return Spool.directory(stateDirectory: stateDirectory, bridge: settings.name, direction: direction.rawValue)
        }
        toMQTT = try Outbox(
            name: MessageDirection.pusherToMQTT.rawValue, limits: limits, overflow: settings.pusherToMQTTOverflow,
            spoolDirectory: spool(.pusherToMQTT), logger: logger)
        toPusher = try Outbox(
            name: MessageDirection.mqttToPusher.rawValue, limits: limits, overflow: settings.mqttToPusherOverflow,
            spoolDirectory: spool(.mqttToPusher), logger: logger)
        metrics.registerZeroSeries(for: settings)
        deadLetters = DeadLetterKeeper(
            bridge: settings.name, stateDirectory: stateDirectory, maxLetters: settings.maxDeadLetters, metrics: metrics, logger: logger)
        receivedToMQTT = metrics.received(bridge: settings.name, direction: .pusherToMQTT)
        receivedToPusher = metrics.received(bridge: settings.name, direction: .mqttToPusher)
        if countsRecoveredAsReceived {
            receivedToMQTT.increment(by: toMQTT.pending)
            receivedToPusher.increment(by: toPusher.pending)
        }
    }

    // MARK: Status

    var status: BridgeStatus {
        var degraded: [MessageDirection: Int] = [:]
        if toMQTT.spoolDegraded { degraded[.pusherToMQTT] = toMQTT.memoryOnly }
        if toPusher.spoolDegraded { degraded[.mqttToPusher] = toPusher.memoryOnly }
        return BridgeStatus(
            connectivity: withBridge { $0.connectivity }, buffered: toMQTT.pending + toPusher.pending, memoryOnly: degraded)
    }

    /// True while ``run()`` runs (from its start until it has released everything).
    var isRunning: Bool { decisions.withLock { $0.lifecycle.isRunning } }

    /// True once ``stop(grace:)`` was called (a reload restarting the bridge, or the shutdown).
    var isStopping: Bool { decisions.withLock { $0.supervisor.isStopping } }

    /// Whether the housekeeping task ran within `interval` (the systemd watchdog's liveness check).
    func isResponsive(within interval: Duration) -> Bool {
        let now = ContinuousClock.now
        return withBridge { $0.isResponsive(now: now, within: interval) }
    }

    // MARK: Lifecycle

    /// Runs the bridge until ``stop(grace:)`` completes (called by the daemon on SIGTERM or a
    /// reload, or by this service itself when its service group shuts down gracefully).
    func run() async throws {
        // A runtime stopped before its service ran (a reload racing a shutdown) has released everything.
        guard decisions.withLock({ $0.lifecycle.runStarted() }) else { return }
        // The dead-letter store's owner: not a child of the group, so it carries out every letter
        // sent before the end (releaseSpools() finishes it and waits for it).
        let deadLetterOwner = Task { await deadLetters.run() }
        await withTaskGroup(of: Void.self) { group in
            for connection in 0..<pusherSlots.count {
                group.addTask { await self.runPusherConnection(connection) }
            }
            group.addTask { await self.mqtt.run() }
            group.addTask { await self.consumeMQTT() }
            group.addTask { await self.watchMQTTStates() }
            group.addTask { await self.sendToMQTT() }
            group.addTask { await self.collectMQTTCompletions() }
            group.addTask { await self.sendToPusher() }
            group.addTask { await self.runCommands() }
            group.addTask { await self.housekeeping() }
            group.addTask { await self.runDiscovery() }
            group.addTask { await self.runCluster() }
            group.addTask { await self.runTimer() }
            group.addTask { await self.resumeRedrives() }
            group.addTask { await self.runHomeAssistant() }
            group.addTask {
                // Cancellation (the bridge finished) throws here; a graceful shutdown drains. Not
                // `stop(grace:)`: that waits for this very task group to end.
                guard (try? await gracefulShutdown()) != nil else { return }
                await self.drain(grace: self.daemon.shutdownGrace)
            }
            perform { $0.started($1) }
            for pusher in pushers { pusher.connect() }
            for await _ in finished.stream { break }
            group.cancelAll()
        }
        // Every task has ended: no acknowledgement can come any more. What is pending stays on disk,
        // and so does when each channel was last held.
        _ = writeLastHeld()
        await releaseSpools()
        await deadLetterOwner.value
        logger.info("bridge stopped")
        decisions.withLock { $0.lifecycle.ended() }.resume()
    }

    /// Syncs and closes both spools, which releases their directory locks.
    private func releaseSpools() async {
        await toMQTT.sync()
        await toPusher.sync()
        await toMQTT.closeSpool()
        await toPusher.closeSpool()
        deadLetters.finish()
    }

    /// Drains and stops the bridge (``drain(grace:)``), then returns only once it has released
    /// everything it holds — both clients ended, both spools closed and their directory locks
    /// released — so that a reload can start its successor on the same spools and client id
    /// (docs/contract.md §3).
    func stop(grace: Duration) async {
        await drain(grace: grace)
        let notRunning = await decisions.wait(in: { state, queue in queue(&state.lifecycle.endWaiters) }) {
            $0.lifecycle.endOrNeverRan()
        }
        // The service never ran (nothing else will close the spools): close them here.
        if notRunning { await releaseSpools() }
    }

    /// Stops taking Pusher input, drains both outboxes for up to `grace`, publishes `offline` on the
    /// status topic, disconnects, and keeps what was not delivered in the spool (docs/contract.md §3).
    /// Returns once ``run()`` has been told to end, not once it has: ``stop(grace:)`` waits for that.
    private func drain(grace: Duration) async {
        let first = decisions.withLock { $0.supervisor.stopRequested() }
        guard first else { return }
        // In a cluster the channels go to the other members first (docs/contract.md §7.4,
        // "handover"), while this member still forwards their events: until a new holder has
        // subscribed, it is the only one that receives them.
        await clusterLeave()
        _ = withBridge { $0.stopRequested() }
        let deadline = ContinuousClock.now + grace
        for pusher in pushers { pusher.disconnect() }
        // What a `throttle` holds goes out now rather than waiting for its interval.
        var held: [Action] = []
        let now = ContinuousClock.now
        withBridge { $0.releaseAllShaped(now: now, into: &held) }
        execute(held)
        toMQTT.close()
        // Drain what is buffered while the MQTT connection and the HTTP API are still there.
        try? await withDeadline(deadline) {
            await self.toMQTT.waitUntilEmpty()
            await self.toPusher.waitUntilEmpty()
        }
        let offline = MQTTMessage(topic: connection.effectiveStatusTopic, payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        // Only while connected: a publish queued for a broker that never answers (a wrong CA)
        // resumes only on delivery, and withDeadline waits for its body, so stop would hang.
        if mqttUp.isOpen {
            try? await withDeadline(deadline) { await self.flushHomeAssistant(deadline: deadline) }
            do {
                try await withDeadline(deadline) { try await self.mqtt.publish(offline) }
            } catch {
                logger.warning("could not publish offline status", metadata: ["error": "\(error)"])
            }
        }
        await mqtt.shutdown()
        toPusher.close()
        try? await withDeadline(deadline) { await self.toPusher.waitUntilEmpty() }
        let left = toMQTT.pending + toPusher.pending
        if left > 0 {
            logger.notice(
                "stopped with undelivered messages", metadata: ["messages": "\(left)", "spooled": "\(connection.buffer.persist)"])
        }
        commands.continuation.finish()
        homeAssistantWake.continuation.finish()
        finished.continuation.yield()
        finished.continuation.finish()
    }

    /// Replaces rules, presence mirrors and `[bridge.webhooks]` without touching the connections
    /// (SIGHUP with only `[[bridge.rule]]` / `[[bridge.presence]]` / `[bridge.webhooks]` changes),
    /// channel discovery included. Rules that move the MQTT → Pusher overflow default (QoS 0 only
    /// ↔ QoS ≥ 1, no `overflow` key) change the buffer's policy and the MQTT client's incoming
    /// flow in place (docs/contract.md §3, §7.6).
    func applyRules(_ settings: BridgeSettings) {
        let overflow = settings.mqttToPusherOverflow
        if overflow != toPusher.overflow {
            logger.info(
                "MQTT → Pusher overflow policy changed in place", metadata: ["from": "\(toPusher.overflow)", "to": "\(overflow)"])
            // The client first: under `backpressure` it must stop reading before the outbox makes the producer wait.
            mqtt.applyIncomingFlow(of: ClientSettings.mqttConfiguration(settings))
            toPusher.changeOverflow(to: overflow)
        }
        metrics.registerZeroSeries(for: settings, keepingReadings: true)
        perform { $0.rulesReplaced(by: settings, $1) }
    }
}

extension PusherClient {
    /// Runs the connection until the task is cancelled; a failure to run is logged, not thrown.
    func runUntilCancelled(logger: Logger) async {
        do { try await run() } catch is CancellationError {} catch {
            logger.error("pusher client stopped", metadata: ["error": "\(error)"])
        }
    }
}

extension String {
    /// The string with leading zeros up to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
