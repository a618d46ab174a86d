import BridgeCore
import Logging
import ServiceLifecycle

/// A configured bridge that a reload could not start (its spool refused to open, say): retried
/// with the bridge's `[bridge.reconnect]` backoff until it starts, is removed or changed by a
/// reload, or the daemon stops. Until then `/readyz` answers 503 and STATUS= names it with the
/// reason (docs/contract.md §3, §5.7).
struct BridgeStartFailure: Sendable {
    /// Why the last attempt failed, as the log says it.
    var error: String
    /// Failed attempts so far (1 after the first).
    var attempts: Int
    /// When the next attempt is made.
    var nextAttempt: ContinuousClock.Instant
    /// Numbers this failure: a retry superseded by a reload finds another one here.
    var attempt: UInt64
    /// Whether the bridge ran in this process before (its buffer was counted as received then).
    var restarting: Bool
    /// The task that makes the next attempt.
    var retry: Task<Void, Never>?

    /// `/readyz`'s and STATUS='s words for it.
    func reason(now: ContinuousClock.Instant) -> String {
        let wait = max(now.duration(to: nextAttempt), .zero)
        let seconds = (wait.seconds * 10).rounded(.up) / 10
        return "not running: cannot start (\(attempts) failed attempt\(attempts == 1 ? "" : "s"), next in \(seconds)s): \(error)"
    }
}

/// What the daemon's one command loop carries out (DaemonServices.swift's `SignalHandler`).
enum DaemonCommand: Sendable {
    /// SIGHUP.
    case reload
    /// The backoff of a failed start has elapsed: try that bridge again.
    case retryStart(bridge: String, failure: UInt64)
    /// SIGTERM or SIGINT (named).
    case shutdown(String)
}

extension Daemon {
    /// A configured bridge that has no runtime, with why.
    struct AbsentBridge: Sendable {
        var name: String
        var reason: String
    }

    /// Starts a bridge of the current config as a service of the group; when it cannot start,
    /// records the failure and schedules a retry. Called from the command loop only.
    func startBridge(_ settings: BridgeSettings, daemon: DaemonSettings, restarting: Bool) async {
        guard let services = state.withLock({ $0.shuttingDown ? nil : $0.services }) else { return }
        let failures = state.withLock { $0.startFailures[settings.name]?.attempts ?? 0 }
        do {
            let runtime = try makeRuntime(settings, daemon: daemon, restarting: restarting)
            state.withLock { state in
                state.startFailures.removeValue(forKey: settings.name)
                state.bridges[settings.name] = runtime
            }
            if failures > 0 {
                logger.notice("bridge started", metadata: ["bridge": "\(settings.name)", "failed_attempts": "\(failures)"])
            }
            await services.addServiceUnlessShutdown(.init(service: runtime, successTerminationBehavior: .ignore))
        } catch {
            startFailed(settings, error: error, failures: failures + 1, restarting: restarting)
        }
    }

    private func startFailed(_ settings: BridgeSettings, error: any Error, failures: Int, restarting: Bool) {
        metrics.errors(bridge: settings.name, kind: "start").increment()
        // No connection of this bridge is up (an old runtime's last reading would say otherwise).
        metrics.connectionUp(bridge: settings.name, side: .pusher).record(0)
        metrics.connectionUp(bridge: settings.name, side: .mqtt).record(0)
        let delay = settings.reconnect.delay(attempt: failures - 1)
        let commands = self.commands.continuation
        state.withLock { state in
            // The old runtime (a restart) is gone: readiness names the bridge as not running.
            state.bridges.removeValue(forKey: settings.name)
            let failure = state.nextStartFailure
            state.nextStartFailure += 1
            let retry = Task {
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                commands.yield(.retryStart(bridge: settings.name, failure: failure))
            }
            state.startFailures[settings.name] = BridgeStartFailure(
                error: "\(error)", attempts: failures, nextAttempt: .now + delay, attempt: failure, restarting: restarting,
                retry: retry)
        }
        // Logged once /readyz and STATUS= can say it too.
        logger.error(
            "cannot start bridge; retrying",
            metadata: [
                "bridge": "\(settings.name)", "error": "\(error)", "failed_attempts": "\(failures)", "retry_in": "\(delay)",
            ])
    }

    /// A retry's backoff has elapsed: starts the bridge with the settings the config has now,
    /// unless a reload removed or started it meanwhile (then the failure is not this one).
    func retryStart(_ name: String, attempt: UInt64) async {
        let current = state.withLock { state -> (BridgeSettings, DaemonSettings, Bool)? in
            guard !state.shuttingDown, let failure = state.startFailures[name], failure.attempt == attempt,
                let configuration = state.configuration, let settings = configuration.bridge(named: name)
            else { return nil }
            return (settings, configuration.daemon, failure.restarting)
        }
        guard let (settings, daemon, restarting) = current else { return }
        await startBridge(settings, daemon: daemon, restarting: restarting)
    }

    /// Forgets a pending start retry (the bridge was removed, or is started anew by a reload).
    func cancelStartRetry(_ name: String) {
        state.withLock { $0.startFailures.removeValue(forKey: name) }?.retry?.cancel()
    }

    /// The running bridges by name, and the configured bridges that have no runtime, with why.
    func bridgesAsConfigured() -> (running: [BridgeRuntime], absent: [AbsentBridge]) {
        let now = ContinuousClock.now
        return state.withLock { state in
            let running = state.bridges.values.sorted { $0.name < $1.name }
            let absent = (state.configuration?.bridges ?? []).compactMap { settings -> AbsentBridge? in
                guard state.bridges[settings.name] == nil else { return nil }
                let reason = state.startFailures[settings.name]?.reason(now: now) ?? "not running: starting"
                return AbsentBridge(name: settings.name, reason: reason)
            }
            return (running, absent)
        }
    }
}
