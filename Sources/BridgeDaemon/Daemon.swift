import BridgeCore
import Locking
import Logging
import ServiceLifecycle
import UnixSignals

/// `pusher-mqtt-bridge run`: every bridge of the config side by side, reloaded on SIGHUP, drained
/// on SIGTERM/SIGINT, reported to systemd and on the operations endpoint (DESIGN §3, §5.7).
///
/// The daemon supervises; each ``BridgeRuntime`` does the bridging. A bridge that fails does not
/// disturb the others: its runtime reconnects on its own, forever.
public final class Daemon: Sendable {
    /// Sysexits codes (DESIGN §3).
    public enum ExitStatus: Int32, Sendable {
        case success = 0
        case failure = 1
        case invalidConfig = 78
    }

    let configPath: String
    let environment: ConfigEnvironment
    let notifier: SystemdNotifier
    let metrics: BridgeMetrics
    let logger: Logger
    /// Called with the operations endpoint's port once it listens (tests use port 0).
    let onMetricsListening: @Sendable (Int) async -> Void

    private let state = Locked(State())

    private struct State {
        var configuration: BridgeConfiguration?
        var bridges: [String: BridgeRuntime] = [:]
        var lastStatus = ""
    }

    public init(
        configPath: String,
        environment: ConfigEnvironment = .process,
        notifier: SystemdNotifier,
        metrics: BridgeMetrics = BridgeMetrics(),
        logger: Logger,
        onMetricsListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.configPath = configPath
        self.environment = environment
        self.notifier = notifier
        self.metrics = metrics
        self.logger = logger
        self.onMetricsListening = onMetricsListening
    }

    /// Loads the config; on failure prints every error to stderr-bound `report` and returns nil.
    public static func loadConfiguration(path: String, environment: ConfigEnvironment) -> Result<BridgeConfiguration, ConfigError> {
        do {
            return .success(try ConfigLoader.load(path: path, environment: environment))
        } catch {
            return .failure(error)
        }
    }

    /// Runs until SIGTERM/SIGINT (or until the task is cancelled) and returns the exit status.
    public func run(configuration: BridgeConfiguration) async -> ExitStatus {
        let signals = await UnixSignalsSequence(trapping: .sighup, .sigterm, .sigint)
        return await withTaskGroup(of: Void.self, returning: ExitStatus.self) { group in
            let bridgeTasks = AsyncStream.makeStream(of: BridgeRuntime.self)
            // The bridges' own tasks live in a child group fed by `bridgeTasks`, so reloads can add some.
            group.addTask {
                await withTaskGroup(of: Void.self) { bridges in
                    for await runtime in bridgeTasks.stream {
                        bridges.addTask { await runtime.run() }
                    }
                    await bridges.waitForAll()
                }
            }

            if case .failure(let error) = start(configuration, spawn: bridgeTasks.continuation) {
                logger.critical("cannot start", metadata: ["error": "\(error)"])
                bridgeTasks.continuation.finish()
                group.cancelAll()
                return .failure
            }
            // The endpoint runs in a service group of its own so that it stops gracefully.
            var endpointGroup: ServiceGroup?
            let endpointDone = AsyncStream.makeStream(of: Void.self)
            if let address = configuration.daemon.metrics {
                let endpoint = OperationsEndpoint(
                    host: address.host, port: address.port, metrics: metrics,
                    readiness: { [weak self] in self?.readiness() ?? Readiness(notReady: ["stopping"]) },
                    logger: logger, onListening: onMetricsListening
                )
                let services = ServiceGroup(configuration: .init(services: [.init(service: endpoint)], gracefulShutdownSignals: [], logger: logger))
                endpointGroup = services
                group.addTask { [logger] in
                    do { try await services.run() } catch {
                        logger.error("metrics endpoint failed", metadata: ["error": "\(error)", "address": "\(address)"])
                    }
                    endpointDone.continuation.finish()
                }
            }
            group.addTask { [weak self] in await self?.reportStatus() }
            if let interval = notifier.watchdogInterval {
                group.addTask { [weak self] in await self?.feedWatchdog(every: interval) }
            }
            notifier.ready(status: statusLine())
            logger.info("started", metadata: ["bridges": "\(configuration.bridges.map(\.name).joined(separator: ","))"])

            for await signal in signals {
                if signal == .sighup {
                    await reload(spawn: bridgeTasks.continuation)
                } else {
                    logger.info("stopping", metadata: ["signal": "\(signal)"])
                    break
                }
            }
            await shutdown()
            bridgeTasks.continuation.finish()
            if let endpointGroup {
                await endpointGroup.triggerGracefulShutdown()
                for await _ in endpointDone.stream {}
            }
            group.cancelAll()
            return .success
        }
    }

    /// Starts one runtime per bridge (opening spools can fail: that is fatal at start).
    private func start(_ configuration: BridgeConfiguration, spawn: AsyncStream<BridgeRuntime>.Continuation) -> Result<Void, any Error> {
        do {
            var runtimes: [BridgeRuntime] = []
            for settings in configuration.bridges {
                runtimes.append(try makeRuntime(settings, daemon: configuration.daemon))
            }
            state.withLock { state in
                state.configuration = configuration
                for runtime in runtimes { state.bridges[runtime.name] = runtime }
            }
            for runtime in runtimes { spawn.yield(runtime) }
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    private func makeRuntime(_ settings: BridgeSettings, daemon: DaemonSettings) throws -> BridgeRuntime {
        try BridgeRuntime(
            settings: settings, daemon: daemon, metrics: metrics,
            logger: logger.with(metadata: ["bridge": "\(settings.name)"])
        )
    }

    /// SIGHUP: load the file again; apply only the difference (DESIGN §3). An invalid file keeps the
    /// old config running and logs every error.
    func reload(spawn: AsyncStream<BridgeRuntime>.Continuation) async {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        let new: BridgeConfiguration
        switch Self.loadConfiguration(path: configPath, environment: environment) {
        case .success(let loaded):
            new = loaded
        case .failure(let error):
            metrics.errors(bridge: "", kind: "reload").increment()
            logger.error("reload refused: the new config is invalid; the old one keeps running", metadata: ["errors": "\(error.diagnostics.count)"])
            for diagnostic in error.diagnostics { logger.error("\(diagnostic.description)") }
            return
        }
        let (old, current) = state.withLock { ($0.configuration, $0.bridges) }
        guard let old else { return }
        let plan = ReloadPlan(old: old, new: new)
        if ConfigDiff(from: old, to: new).daemonChanged {
            logger.warning("changes to [daemon] take effect at the next restart")
        }
        for name in plan.removed {
            guard let runtime = current[name] else { continue }
            logger.info("bridge removed", metadata: ["bridge": "\(name)"])
            await runtime.stop(grace: old.daemon.shutdownGrace)
            _ = state.withLock { $0.bridges.removeValue(forKey: name) }
        }
        for settings in plan.rulesChanged {
            guard let runtime = current[settings.name] else { continue }
            logger.info("bridge rules changed; connections kept", metadata: ["bridge": "\(settings.name)"])
            await runtime.applyRules(settings)
        }
        for settings in plan.restarted + plan.added {
            if let runtime = current[settings.name] {
                logger.info("bridge connection settings changed; reconnecting it", metadata: ["bridge": "\(settings.name)"])
                await runtime.stop(grace: old.daemon.shutdownGrace)
            } else {
                logger.info("bridge added", metadata: ["bridge": "\(settings.name)"])
            }
            do {
                let runtime = try makeRuntime(settings, daemon: old.daemon)
                state.withLock { $0.bridges[settings.name] = runtime }
                spawn.yield(runtime)
            } catch {
                metrics.errors(bridge: settings.name, kind: "start").increment()
                logger.error("cannot start bridge", metadata: ["bridge": "\(settings.name)", "error": "\(error)"])
                _ = state.withLock { $0.bridges.removeValue(forKey: settings.name) }
            }
        }
        state.withLock { state in
            var kept = new
            kept.daemon = old.daemon
            state.configuration = kept
        }
        logger.info(
            "reloaded",
            metadata: [
                "unchanged": "\(plan.unchanged.count)", "rules_changed": "\(plan.rulesChanged.count)",
                "restarted": "\(plan.restarted.count)", "added": "\(plan.added.count)", "removed": "\(plan.removed.count)",
            ])
    }

    /// SIGTERM/SIGINT: stop taking input, drain for up to `shutdown_grace`, publish `offline`, disconnect.
    func shutdown() async {
        notifier.stopping()
        let (runtimes, grace) = state.withLock { state in
            (Array(state.bridges.values), state.configuration?.daemon.shutdownGrace ?? .seconds(5))
        }
        await withTaskGroup(of: Void.self) { group in
            for runtime in runtimes {
                group.addTask { await runtime.stop(grace: grace) }
            }
        }
    }

    /// `/readyz`: every bridge has both sides connected.
    func readiness() -> Readiness {
        let runtimes = state.withLock { Array($0.bridges.values) }
        var notReady: [String] = []
        for runtime in runtimes.sorted(by: { $0.name < $1.name }) {
            let status = runtime.status
            if !status.pusherConnected { notReady.append("\(runtime.name): pusher \(status.pusherState)") }
            if !status.mqttConnected { notReady.append("\(runtime.name): mqtt \(status.mqttState)") }
        }
        return Readiness(notReady: notReady)
    }

    /// systemd's STATUS= line: each bridge's state.
    func statusLine() -> String {
        let runtimes = state.withLock { Array($0.bridges.values) }
        if runtimes.isEmpty { return "no bridges" }
        return runtimes.sorted(by: { $0.name < $1.name }).map { runtime in
            let s = runtime.status
            return "\(runtime.name): pusher \(s.pusherState), mqtt \(s.mqttState), buffered \(s.buffered)"
        }.joined(separator: "; ")
    }

    /// Sends STATUS= whenever it changes (checked every second).
    private func reportStatus() async {
        while !Task.isCancelled {
            let line = statusLine()
            let changed = state.withLock { state in
                defer { state.lastStatus = line }
                return state.lastStatus != line
            }
            if changed { notifier.status(line) }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// WATCHDOG=1 while every bridge's event loop is alive (its heartbeat is recent).
    private func feedWatchdog(every interval: Duration) async {
        while !Task.isCancelled {
            let runtimes = state.withLock { Array($0.bridges.values) }
            let stuck = runtimes.filter { !$0.isResponsive(within: interval * 2) }
            if stuck.isEmpty {
                notifier.watchdog()
            } else {
                logger.critical("bridge unresponsive; withholding WATCHDOG=1", metadata: ["bridges": "\(stuck.map(\.name))"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}

/// What a reload changes, bridge by bridge (DESIGN §3: apply only the difference): the core's
/// ``ConfigDiff``, with changed bridges split by whether their connections can stay.
struct ReloadPlan: Sendable {
    /// Same settings: untouched, connections kept.
    var unchanged: [String]
    /// Only rules or presence mirrors changed: swapped in place, connections kept.
    var rulesChanged: [BridgeSettings] = []
    /// Connection, reconnect or buffer settings changed: the bridge restarts.
    var restarted: [BridgeSettings] = []
    var added: [BridgeSettings]
    var removed: [String]

    init(old: BridgeConfiguration, new: BridgeConfiguration) {
        let diff = ConfigDiff(from: old, to: new)
        unchanged = diff.unchanged
        removed = diff.removed
        added = diff.added.compactMap { new.bridge(named: $0) }
        for name in diff.changed {
            guard let previous = old.bridge(named: name), let settings = new.bridge(named: name) else { continue }
            if previous.pusher == settings.pusher, previous.mqtt == settings.mqtt,
                previous.reconnect == settings.reconnect, previous.buffer == settings.buffer
            {
                rulesChanged.append(settings)
            } else {
                restarted.append(settings)
            }
        }
    }
}

extension Logger {
    /// A copy with extra metadata.
    func with(metadata extra: Logger.Metadata) -> Logger {
        var copy = self
        for (key, value) in extra { copy[metadataKey: key] = value }
        return copy
    }
}
