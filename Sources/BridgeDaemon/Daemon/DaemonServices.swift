import Logging
import ServiceLifecycle
import UnixSignals

/// Handles SIGHUP (reload) and SIGTERM/SIGINT (drain every bridge at once, then return, which
/// shuts the daemon's service group down gracefully), and the start retries of bridges that could
/// not start (Daemon+Starting.swift). One loop carries them all out, one after the other, so a
/// reload, a retry and the shutdown never start or stop the same bridge at once. Without
/// `trapsSignals` (a daemon inside a test process) only ``Daemon/requestReload()`` and
/// ``Daemon/requestShutdown(reason:)`` feed it.
struct SignalHandler: Service {
    let daemon: Daemon

    func run() async throws {
        let signals = daemon.trapsSignals ? await UnixSignalsSequence(trapping: .sighup, .sigterm, .sigint) : nil
        let commands = daemon.commands
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                if let signals {
                    for await signal in signals.cancelOnGracefulShutdown() {
                        commands.continuation.yield(signal == .sighup ? .reload : .shutdown("\(signal)"))
                        if signal != .sighup { return }
                    }
                } else {
                    try? await gracefulShutdown()
                }
                // The service group shuts down: nothing more to carry out.
                commands.continuation.finish()
            }
            for await command in commands.stream {
                switch command {
                case .reload:
                    await daemon.reload()
                case .retryStart(let name, let attempt):
                    await daemon.retryStart(name, attempt: attempt)
                case .shutdown(let signal):
                    daemon.logger.info("stopping", metadata: ["signal": "\(signal)"])
                    await daemon.shutdown()
                    group.cancelAll()
                    return
                }
            }
        }
    }
}

/// Sends systemd's STATUS= whenever it changes (checked every second).
struct StatusReporter: Service {
    let daemon: Daemon

    func run() async throws {
        var last = ""
        for await _ in Ticks(every: .seconds(1)).cancelOnGracefulShutdown() {
            let line = daemon.statusLine()
            if line != last { daemon.notifier.status(line) }
            last = line
        }
    }
}

/// WATCHDOG=1 while every bridge's event loop is alive (its heartbeat is recent).
struct WatchdogFeeder: Service {
    let daemon: Daemon
    let interval: Duration

    func run() async throws {
        for await _ in Ticks(every: interval).cancelOnGracefulShutdown() {
            let stuck = daemon.unresponsiveBridges(within: interval * 2)
            if stuck.isEmpty {
                daemon.notifier.watchdog()
            } else {
                daemon.logger.critical("bridge unresponsive; withholding WATCHDOG=1", metadata: ["bridges": "\(stuck)"])
            }
        }
    }
}

/// A service whose failure is logged, not fatal: the daemon goes on bridging without it (a
/// metrics port in use must not stop the bridges). It then waits for the group's shutdown.
struct ToleratedService<Wrapped: Service>: Service {
    let wrapped: Wrapped
    let what: String
    let logger: Logger

    init(_ wrapped: Wrapped, what: String, logger: Logger) {
        self.wrapped = wrapped
        self.what = what
        self.logger = logger
    }

    func run() async throws {
        do {
            try await wrapped.run()
        } catch is CancellationError {
            return
        } catch {
            logger.error("\(what) failed", metadata: ["error": "\(error)"])
            try? await gracefulShutdown()
        }
    }
}

/// A tick now and then every `interval`, until the task is cancelled.
struct Ticks: AsyncSequence, Sendable {
    let interval: Duration

    init(every interval: Duration) { self.interval = interval }

    struct AsyncIterator: AsyncIteratorProtocol {
        let interval: Duration
        var first = true

        mutating func next() async -> Void? {
            if first {
                first = false
                return ()
            }
            do { try await Task.sleep(for: interval) } catch { return nil }
            return ()
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(interval: interval) }
}
