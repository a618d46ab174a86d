import BridgeCore
import Locking
import Logging
import ServiceLifecycle
import UnixSignals

/// `pusher-mqtt-bridge run`: every bridge of the config side by side, reloaded on SIGHUP, drained
/// on SIGTERM/SIGINT, reported to systemd and on the operations endpoint (docs/contract.md §3, §5.7).
///
/// Everything long-running is a `Service` in one `ServiceGroup` (docs/architecture.md), in this
/// order, so that a graceful shutdown stops them in reverse: the operations endpoint (last to go,
/// `/readyz` answers until the end), the STATUS= reporter, the watchdog feeder, the signal
/// handler, then one ``BridgeRuntime`` per bridge (a reload adds more with
/// `addServiceUnlessShutdown`). A bridge that fails does not disturb the others: its runtime
/// reconnects on its own, forever; a bridge removed by a reload just ends.
public final class Daemon: Sendable {
    /// Sysexits codes (docs/contract.md §3).
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
    /// Called with the webhook listener's port once it listens (docs/contract.md §7.2).
    let onWebhooksListening: @Sendable (Int) async -> Void
    /// Validates a reloaded file in a child process first, so a parser crash cannot take the daemon down.
    let configCheck: ConfigCheck
    /// Whether SIGHUP, SIGTERM and SIGINT drive the daemon. Tests that run it inside the test
    /// process leave the runner's signals alone and use ``requestReload()`` and ``requestShutdown(reason:)``.
    let trapsSignals: Bool

    let state = Locked(State())
    /// What the signal handler's loop carries out, one after the other (DaemonServices.swift).
    let commands = AsyncStream.makeStream(of: DaemonCommand.self)

    struct State {
        var configuration: BridgeConfiguration?
        var bridges: [String: BridgeRuntime] = [:]
        var services: ServiceGroup?
        /// Configured bridges that a reload could not start, retried with their reconnect backoff
        /// (Daemon+Starting.swift).
        var startFailures: [String: BridgeStartFailure] = [:]
        /// Set by ``shutdown()``: no bridge is started any more.
        var shuttingDown = false
        /// Numbers the failed starts, so that a retry superseded by a reload knows it.
        var nextStartFailure: UInt64 = 0
    }

    public init(
        configPath: String,
        environment: ConfigEnvironment = .process,
        notifier: SystemdNotifier,
        metrics: BridgeMetrics = BridgeMetrics(),
        logger: Logger,
        onMetricsListening: @escaping @Sendable (Int) async -> Void = { _ in },
        onWebhooksListening: @escaping @Sendable (Int) async -> Void = { _ in },
        configCheck: ConfigCheck = ConfigCheck(),
        trapsSignals: Bool = true
    ) {
        self.onWebhooksListening = onWebhooksListening
        self.configPath = configPath
        self.environment = environment
        self.notifier = notifier
        self.metrics = metrics
        _ = metrics.errors(bridge: "", kind: "reload")  // in the first scrape, before a reload fails
        self.logger = logger
        self.onMetricsListening = onMetricsListening
        self.configCheck = configCheck
        self.trapsSignals = trapsSignals
    }

    /// What SIGHUP asks for: a reload, carried out by the command loop after what it is doing.
    public func requestReload() {
        commands.continuation.yield(.reload)
    }

    /// What SIGTERM asks for: every bridge drained and stopped, then ``run(configuration:)`` returns.
    public func requestShutdown(reason: String = "requested") {
        commands.continuation.yield(.shutdown(reason))
    }

    /// Loads and validates the config; the error carries every diagnostic.
    public static func loadConfiguration(path: String, environment: ConfigEnvironment) -> Result<BridgeConfiguration, ConfigError> {
        do {
            return .success(try ConfigLoader.load(path: path, environment: environment))
        } catch {
            return .failure(error)
        }
    }

    /// Runs until SIGTERM/SIGINT or ``requestShutdown(reason:)`` (or until the task is cancelled) and returns
    /// the exit status.
    public func run(configuration: BridgeConfiguration) async -> ExitStatus {
        let runtimes: [BridgeRuntime]
        do {
            // Opening spools can fail: that is fatal at start.
            runtimes = try configuration.bridges.map { try makeRuntime($0, daemon: configuration.daemon) }
        } catch let refused as ClientSettingsRefused {
            // A client refuses what the loader let through: still an invalid config, which the
            // unit does not restart (docs/contract.md §3), not a failure to retry.
            logger.critical("invalid config: \(configPath)", metadata: ["error": "\(refused)"])
            return .invalidConfig
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            return .failure
        }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let address = configuration.daemon.metrics {
            let endpoint = OperationsEndpoint(
                host: address.host, port: address.port, metrics: metrics,
                readiness: { [weak self] in self?.readiness() ?? Readiness(notReady: ["stopping"]) },
                logger: logger, onListening: onMetricsListening
            )
            services.append(.init(service: ToleratedService(endpoint, what: "metrics endpoint", logger: logger)))
        }
        if let address = configuration.daemon.webhooks {
            let endpoint = WebhookEndpoint(
                host: address.host, port: address.port, bridge: { [weak self] name in self?.runtime(named: name) }, logger: logger,
                onListening: onWebhooksListening)
            services.append(.init(service: ToleratedService(endpoint, what: "webhook listener", logger: logger)))
        }
        services.append(.init(service: StatusReporter(daemon: self)))
        if let path = configuration.daemon.controlSocketPath(environment: environment.variables) {
            let control = ControlSocket(path: path, logger: logger) { [weak self] request in
                await self?.controlRequest(request) ?? ControlReply.error("the daemon is stopping")
            }
            services.append(.init(service: ToleratedService(control, what: "control socket", logger: logger)))
        }
        if let interval = notifier.watchdogInterval {
            services.append(.init(service: WatchdogFeeder(daemon: self, interval: interval)))
        }
        // When the signal handler returns (SIGTERM/SIGINT, bridges drained), the rest shuts down.
        services.append(.init(service: SignalHandler(daemon: self), successTerminationBehavior: .gracefullyShutdownGroup))
        for runtime in runtimes {
            services.append(.init(service: runtime, successTerminationBehavior: .ignore))
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: logger))
        state.withLock { state in
            state.configuration = configuration
            state.services = group
            for runtime in runtimes { state.bridges[runtime.name] = runtime }
        }
        notifier.ready(status: statusLine())
        logger.info("started", metadata: ["bridges": "\(configuration.bridges.map(\.name).joined(separator: ","))"])
        do {
            try await group.run()
        } catch {
            logger.error("stopped on an error", metadata: ["error": "\(error)"])
            return .failure
        }
        return .success
    }

    func makeRuntime(_ settings: BridgeSettings, daemon: DaemonSettings, restarting: Bool = false) throws -> BridgeRuntime {
        try BridgeRuntime(
            settings: settings, daemon: daemon, metrics: metrics,
            logger: logger.with(metadata: ["bridge": "\(settings.name)"]), countsRecoveredAsReceived: !restarting
        )
    }

    /// SIGHUP: load the file again; apply only the difference (docs/contract.md §3). An invalid
    /// file keeps the old config running and logs every error.
    func reload() async {
        notifier.reloading()
        defer { notifier.ready(status: statusLine()) }
        guard await configCheckPasses() else { return }
        let new: BridgeConfiguration
        switch Self.loadConfiguration(path: configPath, environment: environment) {
        case .success(let loaded):
            new = loaded
        case .failure(let error):
            metrics.errors(bridge: "", kind: "reload").increment()
            logger.error(
                "reload refused: the new config is invalid; the old one keeps running", metadata: ["errors": "\(error.diagnostics.count)"])
            for diagnostic in error.diagnostics { logger.error("\(diagnostic.description)") }
            return
        }
        guard let old = state.withLock({ $0.configuration }) else { return }
        let plan = ReloadPlan(old: old, new: new)
        // Home Assistant discovery is the one [daemon] setting a reload applies (docs/contract.md §8.3).
        var daemon = old.daemon
        daemon.homeAssistant = new.daemon.homeAssistant
        let (current, services): ([String: BridgeRuntime], ServiceGroup?) = state.withLock { state in
            // From here on readiness and STATUS= count the new file's bridges.
            var kept = new
            kept.daemon = daemon
            state.configuration = kept
            return (state.bridges, state.services)
        }
        guard services != nil else { return }
        if plan.daemonChanged {
            logger.warning("changes to [daemon] take effect at the next restart")
        }
        // Before any bridge stops: a stopping bridge publishes what is pending (its removals) before `offline`.
        for (name, runtime) in current {
            if plan.homeAssistantDevicesLeaving.contains(name) {
                // A removed bridge's device leaves Home Assistant with it (so does one restarted as another device).
                runtime.applyHomeAssistant(HomeAssistantSettings(enabled: false, prefix: old.daemon.homeAssistant.prefix))
            } else if let homeAssistant = plan.homeAssistant {
                runtime.applyHomeAssistant(homeAssistant)
            }
        }
        for name in plan.removed {
            cancelStartRetry(name)
            guard let runtime = current[name] else { continue }
            logger.info("bridge removed", metadata: ["bridge": "\(name)"])
            await runtime.stop(grace: old.daemon.shutdownGrace)
            _ = state.withLock { $0.bridges.removeValue(forKey: name) }
        }
        for settings in plan.rulesChanged {
            // A bridge waiting for a start retry takes the new rules at its next attempt.
            guard let runtime = current[settings.name] else { continue }
            logger.info("bridge rules changed; connections kept", metadata: ["bridge": "\(settings.name)"])
            runtime.applyRules(settings)
        }
        for settings in plan.pusherReplaced {
            guard let runtime = current[settings.name] else { continue }
            logger.info("bridge pusher settings changed; replacing its connections one at a time", metadata: ["bridge": "\(settings.name)"])
            runtime.applyRules(settings)
            await runtime.replacePusherSide(with: settings)
        }
        for settings in plan.restarted + plan.added {
            cancelStartRetry(settings.name)
            let running = current[settings.name]
            if let running {
                logger.info("bridge connection settings changed; reconnecting it", metadata: ["bridge": "\(settings.name)"])
                // Returns once the old runtime has released its spools and connections.
                await running.stop(grace: old.daemon.shutdownGrace)
            } else {
                logger.info("bridge added", metadata: ["bridge": "\(settings.name)"])
            }
            await startBridge(settings, daemon: daemon, restarting: running != nil)
        }
        logger.info(
            "reloaded",
            metadata: [
                "unchanged": "\(plan.unchanged.count)", "rules_changed": "\(plan.rulesChanged.count)",
                "pusher_replaced": "\(plan.pusherReplaced.count)",
                "restarted": "\(plan.restarted.count)", "added": "\(plan.added.count)", "removed": "\(plan.removed.count)",
            ])
    }

    /// SIGTERM/SIGINT: every bridge at once stops taking input, drains for up to
    /// `shutdown_grace`, publishes `offline` and disconnects. (The service group would stop them
    /// one after the other; a daemon with several bridges must not take N × grace.)
    func shutdown() async {
        notifier.stopping()
        let (runtimes, grace, retries) = state.withLock { state in
            state.shuttingDown = true
            defer { state.startFailures.removeAll() }
            return (
                Array(state.bridges.values), state.configuration?.daemon.shutdownGrace ?? .seconds(5),
                state.startFailures.values.compactMap(\.retry)
            )
        }
        for retry in retries { retry.cancel() }
        await withTaskGroup(of: Void.self) { group in
            for runtime in runtimes {
                group.addTask { await runtime.stop(grace: grace) }
            }
        }
    }

    /// `/readyz`: every configured bridge runs, has both sides connected, and its MQTT → Pusher
    /// delivery is not paused by a 403 from Pusher (docs/contract.md §7.3). A bridge that could not
    /// start, or is being restarted, is named with the reason.
    func readiness() -> Readiness {
        var notReady: [String] = []
        var details: [String] = []
        let (runtimes, absent) = bridgesAsConfigured()
        notReady += absent.map { "\($0.name): \($0.reason)" }
        for runtime in runtimes {
            if runtime.isStopping {
                notReady.append("\(runtime.name): stopping")
                continue
            }
            notReady += runtime.status.connectivity.notReadyReasons.map { "\(runtime.name): \($0)" }
            if let pause = runtime.pusherDeliveryPauseReason {
                notReady.append("\(runtime.name): \(pause); MQTT→Pusher paused, buffering")
            }
            if let problem = runtime.clusterReadinessProblem { notReady.append("\(runtime.name): \(problem)") }
            if let problem = runtime.sessionTakeoverProblem { notReady.append("\(runtime.name): \(problem)") }
            notReady += runtime.sharedSubscriptionProblems.map { "\(runtime.name): \($0)" }
            if let summary = runtime.clusterSummary { details.append("\(runtime.name): \(summary)") }
            if let summary = runtime.pusherConnectionsSummary { details.append("\(runtime.name): pusher connections \(summary)") }
        }
        return Readiness(notReady: notReady, details: details)
    }

    /// systemd's STATUS= line: each bridge's state.
    func statusLine() -> String {
        let (runtimes, absent) = bridgesAsConfigured()
        if runtimes.isEmpty && absent.isEmpty { return "no bridges" }
        let lines = runtimes.map { runtime in
            let s = runtime.status
            let connections = runtime.pusherConnectionsSummary.map { " (\($0))" } ?? ""
            var line =
                "\(runtime.name): pusher \(s.connectivity.pusherState)\(connections), mqtt \(s.connectivity.mqttState), buffered \(s.buffered)"
            for (direction, count) in s.memoryOnly.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                line += ", \(direction.rawValue) spool degraded (\(count) in memory only)"
            }
            if let pause = runtime.pusherDeliveryPauseReason { line += ", MQTT→Pusher paused (\(pause))" }
            if let summary = runtime.clusterSummary { line += ", \(summary)" }
            if let problem = runtime.clusterReadinessProblem { line += " (\(problem))" }
            if let problem = runtime.sessionTakeoverProblem { line += " (\(problem))" }
            return (runtime.name, line)
        }
        let down = absent.map { ($0.name, "\($0.name): \($0.reason)") }
        return (lines + down).sorted { $0.0 < $1.0 }.map(\.1).joined(separator: "; ")
    }

    /// The bridges whose event loops missed their heartbeat for `interval`.
    func unresponsiveBridges(within interval: Duration) -> [String] {
        runtimesByName().filter { !$0.isResponsive(within: interval) }.map(\.name)
    }

    /// The running bridge named `name` (the webhook listener's lookup).
    func runtime(named name: String) -> BridgeRuntime? {
        state.withLock { $0.bridges[name] }
    }

    private func runtimesByName() -> [BridgeRuntime] {
        state.withLock { Array($0.bridges.values) }.sorted { $0.name < $1.name }
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
