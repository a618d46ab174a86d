import BridgeCore
import Foundation
import Logging
import TestSupport
import Testing

@testable import BridgeDaemon

/// Issue 26, defect 1: a reload that restarts a bridge stops the old runtime and opens the new one
/// on the same spool directories. `stop(grace:)` used to return before `run()` had closed the
/// spools, so the new runtime found their directory locks held ("directory is in use by another
/// spool") about one reload in two, and the bridge stayed down. These tests open the successor
/// right after `stop` returns, as `Daemon.reload()` does. No servers: both sides point at a
/// closed port and keep reconnecting, which does not matter to the spools.
@Suite struct RuntimeRestartTests {
    static func settings(stateDirectory: String) throws -> (BridgeSettings, DaemonSettings) {
        var conf = BridgesConf(pusherPort: 9, mqttPort: 9, stateDirectory: stateDirectory)
        conf.name = "r"
        conf.rules = [BridgesConf.mqttToPusher(name: "in", topic: "t/+", channel: "c-{1}", event: "e")]
        let configuration = try conf.parse()
        return (try #require(configuration.bridges.first), configuration.daemon)
    }

    static func makeRuntime(_ settings: BridgeSettings, _ daemon: DaemonSettings) throws -> BridgeRuntime {
        try BridgeRuntime(
            settings: settings, daemon: daemon, metrics: BridgeMetrics(),
            logger: Logger(label: "restart-test", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    static func temporaryStateDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("restart-\(UUID().uuidString)").path
    }

    /// The successor opens the spools the moment `stop` returns, 20 times in a row.
    @Test func aStoppedRuntimeHasReleasedItsSpoolsWhenStopReturns() async throws {
        let directory = Self.temporaryStateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (settings, daemon) = try Self.settings(stateDirectory: directory)
        var runtime = try Self.makeRuntime(settings, daemon)
        for _ in 0..<20 {
            let running = runtime
            let task = Task { try await running.run() }
            try await waitUntil("the runtime runs", timeout: .seconds(10)) { running.isRunning }
            await running.stop(grace: .zero)
            #expect(!running.isRunning)
            runtime = try Self.makeRuntime(settings, daemon)  // threw `SpoolError.locked` before the fix
            try await task.value
        }
        await runtime.stop(grace: .zero)
    }

    /// A runtime whose service never ran (a reload that raced the shutdown) is released by `stop`,
    /// and a `run()` after that returns at once instead of opening connections.
    @Test func aRuntimeStoppedBeforeItRanReleasesItsSpools() async throws {
        let directory = Self.temporaryStateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (settings, daemon) = try Self.settings(stateDirectory: directory)
        let never = try Self.makeRuntime(settings, daemon)
        await never.stop(grace: .zero)
        let successor = try Self.makeRuntime(settings, daemon)  // the spools' locks are free
        try await never.run()
        #expect(!never.isRunning)
        await successor.stop(grace: .zero)
    }

    /// Two callers of `stop` (a reload and the shutdown at once) both return only once it has ended.
    @Test func everyCallerOfStopWaitsForTheEnd() async throws {
        let directory = Self.temporaryStateDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (settings, daemon) = try Self.settings(stateDirectory: directory)
        let runtime = try Self.makeRuntime(settings, daemon)
        let task = Task { try await runtime.run() }
        try await waitUntil("the runtime runs", timeout: .seconds(10)) { runtime.isRunning }
        async let first: Void = runtime.stop(grace: .zero)
        async let second: Void = runtime.stop(grace: .zero)
        _ = await (first, second)
        #expect(!runtime.isRunning)
        let successor = try Self.makeRuntime(settings, daemon)
        try await task.value
        await successor.stop(grace: .zero)
    }
}
