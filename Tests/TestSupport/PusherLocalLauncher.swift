import Foundation
import Locking
import Logging
import PusherLocal
import ServiceLifecycle

/// pusher-local's server (the `PusherLocal` library) in the test process, on a free loopback port
/// kept across restarts, started and stopped by the test (``PusherLocalServer/withRunning(_:logger:_:)``
/// scopes a server to one closure; a test of a Pusher outage needs to stop it in the middle and
/// start it again on the same port).
///
///     let pusher = try PusherLocalLauncher()
///     let running = try await pusher.start()   // its control endpoints: running.disconnectAll(…)
///     await pusher.stop()                       // 4200 to every client, as SIGTERM does
///     try await pusher.start()                  // the same port again
///
/// Its log goes nowhere unless `PUSHER_TEST_LOG` is set.
public final class PusherLocalLauncher: Sendable {
    /// The configuration it runs with; its port is fixed at creation.
    public let configuration: PusherLocalConfiguration
    private let logger: Logger
    private let state = Locked(State())

    private struct State {
        var running: RunningPusherLocal?
        var group: ServiceGroup?
        var task: Task<Void, any Error>?
    }

    /// - Parameter configuration: port 0 (the default here) picks a free port below the ephemeral
    ///   range (``LoopbackPort/free()``), so that the restarted server can bind it again.
    public init(_ configuration: PusherLocalConfiguration = PusherLocalConfiguration(port: 0)) throws {
        var configuration = configuration
        if configuration.port == 0 { configuration.port = try LoopbackPort.free() }
        self.configuration = configuration
        var logger = Logger(label: "pusher-local-test")
        logger.logLevel = ProcessInfo.processInfo.environment["PUSHER_TEST_LOG"] == nil ? .critical : .debug
        self.logger = logger
    }

    deinit {
        state.withLock { $0.task }?.cancel()
    }

    /// The loopback port.
    public var port: Int { configuration.port }

    /// The running server with its in-process control endpoints.
    public var running: RunningPusherLocal {
        get throws {
            guard let running = state.withLock({ $0.running }) else { throw TestFailure("pusher-local is not running") }
            return running
        }
    }

    /// Starts the server and returns once it listens. A port still held from the last run (a client's
    /// connection in TIME_WAIT cannot hold it: the server binds with SO_REUSEADDR) is retried for 5 s.
    @discardableResult
    public func start() async throws -> RunningPusherLocal {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            do {
                return try await startOnce()
            } catch let error where ContinuousClock.now < deadline && "\(error)".contains("in use") {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    private func startOnce() async throws -> RunningPusherLocal {
        precondition(state.withLock { $0.task == nil }, "pusher-local started twice")
        let (ready, readyContinuation) = AsyncStream.makeStream(of: RunningPusherLocal.self)
        let server = PusherLocalServer(configuration: configuration, logger: logger) { running in
            readyContinuation.yield(running)
            readyContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        let task = Task {
            // Ends the wait below also when the server fails before listening.
            defer { readyContinuation.finish() }
            try await group.run()
        }
        var iterator = ready.makeAsyncIterator()
        guard let running = await iterator.next() else {
            let failure: any Error
            do {
                try await task.value
                failure = TestFailure("pusher-local stopped before it was listening")
            } catch {
                failure = error
            }
            throw failure
        }
        state.withLock { state in
            state.running = running
            state.group = group
            state.task = task
        }
        return running
    }

    /// A graceful stop, as SIGTERM does it: every client is asked to reconnect (close code 4200) and
    /// the port is closed; returns once the server has ended (its connections are given 5 s to close).
    public func stop() async {
        guard
            let (group, task) = state.withLock({ state -> (ServiceGroup, Task<Void, any Error>)? in
                defer { state = State() }
                return state.group.flatMap { group in state.task.map { (group, $0) } }
            })
        else { return }
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}
