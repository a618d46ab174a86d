import BridgeCore
import Foundation
import PusherLocal
import TestSupport
import Testing

@testable import BridgeDaemon

/// A `BridgeRuntime` in the test process between a real mosquitto and an in-process pusher-local,
/// driven only through its entry points (`init`, `run()`, `stop(grace:)`, `status`, `isRunning`,
/// `isStopping`): both directions, stop, the broker's loss and Pusher's (docs/contract.md §5.5, §5.6).
/// Every wait has a deadline and waits for a condition, never for a fixed time.
@Suite(.serialized, .timeLimit(.minutes(2))) struct BridgeRuntimeInProcessTests {
    static func numbered(_ prefix: String, _ range: Range<Int>) -> [String] { range.map { "\(prefix)\($0)" } }

    @Test func routesMQTTToPusherAndPusherToMQTT() async throws {
        try await BridgeUnderTest.with { rig in
            let runtime = try rig.makeRuntime()
            try await withRunning(runtime) {
                try await rig.waitUntilBridging()
                #expect(runtime.isRunning)
                #expect(runtime.status.connectivity.isReady)

                let up = Self.numbered("m", 0..<20)
                for payload in up { try await rig.publishUp(payload) }
                try await rig.waitForAll(up, "MQTT → Pusher") { rig.upData() }
                // One channel: the order holds (docs/contract.md §5.4), and nothing came twice on a calm line.
                #expect(rig.upData() == up)

                let down = Self.numbered("d", 0..<20)
                for data in down { try await rig.trigger("cmd", data: data) }
                try await rig.waitForAll(down, "Pusher → MQTT") { rig.downPayloads("down/cmd") }
                #expect(rig.downPayloads("down/cmd") == down)
                try await waitUntil("both outboxes are empty") { runtime.status.buffered == 0 }
            }
        }
    }

    /// `stop` returns once the bridge has let go of everything: `run()` has returned, its Pusher
    /// connection is closed at the server, `offline` is on its status topic, and its spools open again.
    @Test func stopReleasesSpoolsAndConnections() async throws {
        try await BridgeUnderTest.with { rig in
            let runtime = try rig.makeRuntime()
            let task = Task { try await runtime.run() }
            try await rig.waitUntilBridging()
            #expect(!runtime.isStopping)
            try await waitUntil("online on the status topic") { rig.downPayloads(rig.statusTopic).last == "online" }

            await runtime.stop(grace: .seconds(2))
            #expect(runtime.isStopping)
            #expect(!runtime.isRunning)
            try await task.value  // run() has returned: none of its tasks is left
            try await waitUntil("offline on the status topic") { rig.downPayloads(rig.statusTopic).last == "offline" }
            let running = try rig.pusher.running
            try await waitUntil("the bridge's Pusher connection is closed") {
                !running.connections().contains { $0.channels.contains("down") }
            }
            // The spools' directory locks are free: a successor opens them (SpoolError.locked otherwise).
            let successor = try rig.makeRuntime()
            await successor.stop(grace: .zero)
        }
    }

    /// The broker goes away: Pusher events keep arriving and are buffered; once the broker is back
    /// (same port, its persistence kept the test subscriber's session) every one is published.
    @Test func brokerLossBuffersAndDeliversAfterTheBrokerIsBack() async throws {
        try await BridgeUnderTest.with { rig in
            let runtime = try rig.makeRuntime()
            try await withRunning(runtime) {
                try await rig.waitUntilBridging()
                try await waitUntil("the probes are acknowledged") { runtime.status.buffered == 0 }
                await rig.broker.stop()
                try await waitUntil("the bridge saw the broker go") { !runtime.status.connectivity.mqttConnected }

                let down = Self.numbered("d", 0..<30)
                for data in down { try await rig.trigger("cmd", data: data) }
                try await waitUntil("the events are buffered", detail: { "buffered \(runtime.status.buffered)" }) {
                    runtime.status.buffered == down.count
                }
                #expect(rig.downPayloads("down/cmd").isEmpty)

                try await rig.broker.start()
                try await rig.waitForAll(down, "buffered Pusher → MQTT after the broker's restart") { rig.downPayloads("down/cmd") }
                try await waitUntil("the buffer is empty") { runtime.status.buffered == 0 }
                #expect(runtime.status.connectivity.isReady)
            }
        }
    }

    /// pusher-local's control endpoint closes every connection (4200, reconnect at once): the bridge
    /// reconnects with a new socket and subscribes to its channel again.
    @Test func pusherClosingTheConnectionIsFollowedByAResubscription() async throws {
        try await BridgeUnderTest.with { rig in
            let runtime = try rig.makeRuntime()
            try await withRunning(runtime) {
                try await rig.waitUntilBridging()
                let running = try rig.pusher.running
                let before = try #require(running.connections().first { $0.channels.contains("down") }).socketID

                #expect(running.disconnectAll(code: 4200) >= 2)
                try await waitUntil("the bridge is subscribed to down again on a new connection") {
                    running.connections().contains { $0.channels.contains("down") && $0.socketID != before }
                }
                try await rig.waitUntilBridging()
                let down = Self.numbered("d", 0..<10)
                for data in down { try await rig.trigger("cmd", data: data) }
                try await rig.waitForAll(down, "Pusher → MQTT after the reconnect") { rig.downPayloads("down/cmd") }
            }
        }
    }

    /// pusher-local stops (as on SIGTERM: 4200 to every client, port closed) and starts again on the
    /// same port: what MQTT brought meanwhile is buffered and published once it is back, and the bridge
    /// subscribes to its channel on the new server.
    @Test func pusherServerRestartBuffersAndResubscribes() async throws {
        try await BridgeUnderTest.with { rig in
            let runtime = try rig.makeRuntime()
            try await withRunning(runtime) {
                try await rig.waitUntilBridging()
                try await waitUntil("the probes are acknowledged") { runtime.status.buffered == 0 }
                await rig.pusher.stop()
                try await waitUntil("the bridge saw Pusher go") { !runtime.status.connectivity.pusherConnected }

                let up = Self.numbered("m", 0..<10)
                for payload in up { try await rig.publishUp(payload) }
                try await waitUntil("the messages are buffered", detail: { "buffered \(runtime.status.buffered)" }) {
                    runtime.status.buffered == up.count
                }

                let restarted = try await rig.pusher.start()
                // Published through the HTTP API of the new server (nobody listens to up-x on it yet,
                // so the server's own count is the witness), and acknowledged.
                try await waitUntil(
                    "the buffered messages are published",
                    detail: { "buffered \(runtime.status.buffered), published \(restarted.stats()?.counters.eventsPublished ?? -1)" }
                ) {
                    runtime.status.buffered == 0 && (restarted.stats()?.counters.eventsPublished ?? 0) >= up.count
                }
                try await rig.waitUntilBridging()
                let down = Self.numbered("d", 0..<10)
                for data in down { try await rig.trigger("cmd", data: data) }
                try await rig.waitForAll(down, "Pusher → MQTT on the restarted server") { rig.downPayloads("down/cmd") }
            }
        }
    }
}
