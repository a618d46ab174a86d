import BridgeCore
import Foundation
import Locking
import PusherLocal
import TestSupport
import Testing

@testable import BridgeDaemon

/// `Daemon` in the test process, as `pusher-mqtt-bridge run` runs it, between a real mosquitto and
/// an in-process pusher-local: start, a reload that changes a rule and a connection setting at
/// once (docs/contract.md §3), and the shutdown. Without signal handlers: the test asks for the
/// reload and the stop (`requestReload()`, `requestShutdown(reason:)`), as SIGHUP and SIGTERM do.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DaemonInProcessTests {
    /// Starts a daemon on `configPath` and returns it with the task that runs it.
    static func start(_ rig: BridgeUnderTest, configPath: String) throws -> (Daemon, Task<Daemon.ExitStatus, Never>) {
        let configuration = try rig.conf.parse()
        let daemon = Daemon(
            configPath: configPath, environment: .process, notifier: SystemdNotifier(environment: [:]),
            logger: BridgeUnderTest.logger,
            // The reload's child-process check is ConfigCheckTests' subject; here it always passes.
            configCheck: ConfigCheck(command: ["/bin/true"]), trapsSignals: false)
        let task = Task { await daemon.run(configuration: configuration) }
        return (daemon, task)
    }

    /// A reload changes the MQTT → Pusher rule's event name and the MQTT keep-alive (which restarts
    /// the bridge) while QoS 1 messages keep coming: every message arrives, the new rule applies after
    /// it, and Pusher → MQTT works on. Then the shutdown stops everything and releases the spools.
    @Test func reloadChangingARuleAndAConnectionSettingLosesNothing() async throws {
        try await BridgeUnderTest.with { rig in
            let configPath = rig.stateDirectory + "/bridges.conf"
            try rig.conf.write(to: configPath)
            let (daemon, task) = try Self.start(rig, configPath: configPath)

            try await waitUntil("the daemon runs the bridge") { daemon.runtime(named: rig.conf.name)?.isRunning == true }
            let first = try #require(daemon.runtime(named: rig.conf.name))
            try await rig.waitUntilBridging()
            try await waitUntil("the daemon is ready", detail: { "\(daemon.readiness().notReady)" }) {
                daemon.readiness().notReady.isEmpty
            }

            var changed = rig.conf
            changed.keepAlive = "6s"
            changed.rules[0] = BridgesConf.mqttToPusher(name: "up", topic: "up/+", channel: "up-{1}", event: "reading2")
            try changed.write(to: configPath)
            for n in 0..<10 { try await rig.publishUp("q\(n)") }
            // A publisher that goes on all through the reload: while the old runtime drains,
            // while no runtime is connected, and while the new one starts. The broker's session (same
            // client id, clean_session = false) and the spools carry every message across.
            let stop = Locked(false)
            let published = Locked((0..<10).map { "q\($0)" })
            let publisher = Task {
                while !stop.withLock({ $0 }) {
                    let payload = "q\(published.withLock { $0.count })"
                    try await rig.publishUp(payload)
                    published.withLock { $0.append(payload) }
                    // The publisher's rate (about 500 a second), not a wait: the reload takes up to
                    // shutdown_grace, and one channel's events go to Pusher 10 to a request.
                    try await Task.sleep(for: .milliseconds(2))
                }
            }
            daemon.requestReload()
            try await waitUntil("the bridge was restarted by the reload") {
                guard let current = daemon.runtime(named: rig.conf.name) else { return false }
                return current !== first && current.isRunning
            }
            #expect(!first.isRunning)
            let atRestart = published.withLock { $0.count }
            try await waitUntil("20 more are published to the new runtime") { published.withLock { $0.count } >= atRestart + 20 }
            stop.withLock { $0 = true }
            try await publisher.value
            let all = published.withLock { $0 }
            try await rig.waitForAll(all, "MQTT → Pusher across the reload") { rig.upData(event: nil) }

            // The new rule: what is published now is the new event.
            try await rig.publishUp("after-reload")
            try await waitUntil("a message after the reload arrives as reading2") {
                rig.upData(event: "reading2").contains("after-reload")
            }
            #expect(!rig.upData(event: "reading").contains("after-reload"))
            let down = (0..<10).map { "d\($0)" }
            for data in down { try await rig.trigger("cmd", data: data) }
            try await rig.waitForAll(down, "Pusher → MQTT after the reload") { rig.downPayloads("down/cmd") }

            let second = try #require(daemon.runtime(named: rig.conf.name))
            daemon.requestShutdown(reason: "test")
            #expect(await task.value == .success)
            #expect(!second.isRunning && second.isStopping)
            let running = try rig.pusher.running
            try await waitUntil("the bridge's Pusher connection is closed") {
                !running.connections().contains { $0.channels.contains("down") }
            }
            try await waitUntil("offline on the status topic") { rig.downPayloads(rig.statusTopic).last == "offline" }
            // Released: the spools open again.
            let successor = try rig.makeRuntime()
            await successor.stop(grace: .zero)
        }
    }

    /// A reload of an invalid file changes nothing: the bridge keeps its connections and routes on.
    @Test func anInvalidReloadKeepsTheRunningBridge() async throws {
        try await BridgeUnderTest.with { rig in
            let configPath = rig.stateDirectory + "/bridges.conf"
            try rig.conf.write(to: configPath)
            let (daemon, task) = try Self.start(rig, configPath: configPath)
            try await waitUntil("the daemon runs the bridge") { daemon.runtime(named: rig.conf.name)?.isRunning == true }
            let first = try #require(daemon.runtime(named: rig.conf.name))
            try await rig.waitUntilBridging()

            try (rig.conf.text + "\n[[bridge.rule]]\nname = \"broken\"\n").write(toFile: configPath, atomically: true, encoding: .utf8)
            let errorsBefore = Self.reloadErrors(daemon)
            daemon.requestReload()
            try await waitUntil("the reload was refused") { Self.reloadErrors(daemon) > errorsBefore }
            #expect(daemon.runtime(named: rig.conf.name) === first)
            #expect(first.isRunning && !first.isStopping)
            let up = (0..<5).map { "m\($0)" }
            for payload in up { try await rig.publishUp(payload) }
            try await rig.waitForAll(up, "MQTT → Pusher after the refused reload") { rig.upData() }

            daemon.requestShutdown(reason: "test")
            #expect(await task.value == .success)
            #expect(!first.isRunning)
        }
    }

    /// The daemon's `errors_total{bridge="",kind="reload"}` as the metrics endpoint would show it
    /// (each bridge has its own `kind="reload"` series too, for a Pusher side it could not replace).
    static func reloadErrors(_ daemon: Daemon) -> Int {
        let scrape = String(decoding: daemon.metrics.render(), as: UTF8.self)
        let line = scrape.split(separator: "\n").first {
            $0.hasPrefix("pusher_mqtt_bridge_errors_total{") && $0.contains(#"kind="reload""#) && $0.contains(#"bridge="""#)
        }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }
}
