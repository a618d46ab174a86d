import BridgeCore
import Foundation
import Logging
import PusherChannels
import TestSupport
import Testing

@testable import BridgeDaemon

@Suite struct OutgoingMessageCodecTests {
    @Test func mqttRecordsRoundTrip() {
        let message = OutgoingMQTT(
            publish: MQTTPublish(
                rule: "prices", topic: "dash/prices/ü", payload: [0, 255, 10], qos: 1, retain: true,
                userProperties: [.init("pusher-channel", "market-data"), .init("pusher-event", "new-price")]),
            receivedAtMillis: 1_795_297_102_123)
        #expect(OutgoingMQTT.decode(message.encoded()) == message)
    }

    @Test func pusherRecordsRoundTrip() {
        let event = OutgoingPusher(
            event: PusherEventPublish(rule: "t", channel: "sensor-1", event: "temperature", data: "{\"v\":\"☃\"}", via: .clientEvent),
            receivedAtMillis: 42)
        #expect(OutgoingPusher.decode(event.encoded()) == event)
    }

    /// A record is allocated once at its own size: a held 8 KB event does not keep a doubled buffer
    /// (docs/history/benchmarks.md "Memory").
    @Test func recordsAreSizedToTheirContent() {
        let data = String(repeating: "x", count: 8_192)
        let pusher = OutgoingPusher(
            event: PusherEventPublish(rule: "r", channel: "c", event: "e", data: data, via: .http), receivedAtMillis: 1
        ).encoded()
        #expect(pusher.capacity - pusher.count < 64, "capacity \(pusher.capacity) for \(pusher.count) bytes")
        let mqtt = OutgoingMQTT(
            publish: MQTTPublish(rule: "r", topic: "t", payload: Array(data.utf8), qos: 1, retain: false), receivedAtMillis: 1
        ).encoded()
        #expect(mqtt.capacity - mqtt.count < 64, "capacity \(mqtt.capacity) for \(mqtt.count) bytes")
    }

    @Test func truncatedOrForeignRecordsAreRejectedNotTrapped() {
        let bytes = OutgoingPusher(
            event: PusherEventPublish(rule: "r", channel: "c", event: "e", data: "d", via: .http), receivedAtMillis: 1
        ).encoded()
        for cut in 0..<bytes.count {
            #expect(OutgoingPusher.decode(Array(bytes[..<cut])) == nil)
        }
        #expect(OutgoingPusher.decode(bytes + [0]) == nil)
        #expect(OutgoingMQTT.decode(bytes) == nil)
        var wrongVersion = bytes
        wrongVersion[0] = 9
        #expect(OutgoingPusher.decode(wrongVersion) == nil)
    }
}

@Suite struct OutboxTests {
    static func item(_ n: Int) -> OutgoingPusher {
        OutgoingPusher(
            event: PusherEventPublish(rule: "r", channel: "c", event: "e", data: "m\(n)", via: .http), receivedAtMillis: Int64(n))
    }

    @Test func handsOutInOrderAndKeepsUnacknowledgedAcrossRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let limits = BufferLimits(maxMessages: 100, maxBytes: 1 << 20)
        do {
            let outbox = try Outbox<OutgoingPusher>(
                name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: Logger(label: "t"))
            for n in 0..<5 { outbox.append(Self.item(n)) }
            let first = await outbox.next(max: 3)
            #expect(first.map(\.item.event.data) == ["m0", "m1", "m2"])
            outbox.acknowledge(first[0])
            outbox.acknowledge(first[2])
            #expect(outbox.pending == 3)
            await outbox.sync()
            await outbox.closeSpool()
        }
        // After a restart: everything above the durable watermark (m0), in order. m2 was acknowledged
        // out of order, above the unacknowledged m1, so it comes again: at-least-once (docs/contract.md §5.6).
        let reopened = try Outbox<OutgoingPusher>(
            name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: Logger(label: "t"))
        #expect(await reopened.next(max: 10).map(\.item.event.data) == ["m1", "m2", "m3", "m4"])
        await reopened.closeSpool()
    }

    @Test func overflowDropsAreReported() async {
        let outbox = try! Outbox<OutgoingPusher>(
            name: "t", limits: BufferLimits(maxMessages: 2, maxBytes: 1 << 20), overflow: .dropNewest, spoolDirectory: nil,
            logger: Logger(label: "t"))
        #expect(outbox.append(Self.item(0)).dropped == 0)
        #expect(outbox.append(Self.item(1)).dropped == 0)
        #expect(outbox.append(Self.item(2)).dropped == 1)
        #expect(await outbox.next(max: 10).map(\.item.event.data) == ["m0", "m1"])
    }

    @Test func nextWaitsForAnAppendAndEndsWhenClosed() async {
        let outbox = try! Outbox<OutgoingPusher>(
            name: "t", limits: BufferLimits(maxMessages: 10, maxBytes: 1 << 20), overflow: .dropOldest, spoolDirectory: nil,
            logger: Logger(label: "t"))
        async let waited = outbox.next(max: 10)
        try? await Task.sleep(for: .milliseconds(50))
        outbox.append(Self.item(7))
        #expect(await waited.map(\.item.event.data) == ["m7"])
        outbox.close()
        #expect(await outbox.next(max: 10).isEmpty)
    }
}

@Suite struct LaneQueueTests {
    @Test func pushWaitsForRoomAndPopDrainsAfterFinish() async {
        let lane = LaneQueue<Int>(capacity: 2)
        #expect(await lane.push(1, channel: "c"))
        #expect(await lane.push(2, channel: "c"))
        async let third = lane.push(3, channel: "c")  // waits: the queue is full
        let first = await lane.pop(max: 10)
        #expect(first.elements == [1, 2])
        #expect(await third)
        lane.finished(first)
        lane.finish()
        #expect(await lane.pop(max: 10).elements == [3])
        #expect(await lane.pop(max: 10).elements == [])
        #expect(await !lane.push(4, channel: "c"))
    }

    /// With a byte budget, a push of large elements waits once they fill it, and goes on when a
    /// lane takes some.
    @Test func pushWaitsWhenTheWaitingBytesFillTheBudget() async {
        let lane = LaneQueue<[UInt8]>(capacity: 100, byteCapacity: 10_000, size: { $0.count })
        let big = [UInt8](repeating: 7, count: 6_000)
        #expect(await lane.push(big, channel: "c"))
        #expect(await lane.push(big, channel: "c"))  // 6,000 < 10,000: room for one more
        async let third = lane.push(big, channel: "c")  // waits: 12,000 bytes wait
        let first = await lane.pop(max: 10)
        #expect(first.elements.count == 2)
        #expect(await third)
        lane.finished(first)
        lane.finish()
        #expect(await lane.pop(max: 10).elements.count == 1)
    }

    /// One push wakes one waiting lane; it takes a full batch and wakes the next for the rest.
    @Test func wokenLanesTakeBatchesOneAfterTheOther() async {
        let lanes = LaneQueue<Int>(capacity: 100)
        async let first = lanes.pop(max: 10)
        async let second = lanes.pop(max: 10)
        while lanes.waitingLanes < 2 { await Task.yield() }
        let events = (0..<20).map { (element: $0, channel: $0 < 10 ? "a" : "b") }
        #expect(await lanes.push(events))
        let batches = [await first, await second].map(\.elements).sorted { $0.first ?? 0 < $1.first ?? 0 }
        #expect(batches == [Array(0..<10), Array(10..<20)])
    }

    /// A channel's next events wait while its batch is out, on every lane; other channels go on.
    @Test func aChannelHasOneBatchInFlightAndOtherChannelsGoOn() async {
        let lanes = LaneQueue<Int>(capacity: 10)
        #expect(await lanes.push(1, channel: "a"))
        let first = await lanes.pop(max: 10)
        #expect(first.elements == [1] && first.channels == ["a"])
        #expect(await lanes.push(2, channel: "a"))
        #expect(await lanes.push(3, channel: "b"))
        #expect(await lanes.pop(max: 10).elements == [3])  // "a" is in flight: its 2 waits
        async let next = lanes.pop(max: 10)  // a second lane waits for a ready channel
        lanes.finished(first)
        #expect(await next.elements == [2])
    }
}

@Suite struct TapLineTests {
    @Test func applicationEventsKeepDataExactly() {
        let line = Tap.line(for: PusherEvent(name: "new-price", channel: "market-data", data: "{\"p\":\"ü\"}\n", userID: "7"))
        #expect(line == #"{"channel":"market-data","event":"new-price","data":"{\"p\":\"ü\"}\n","user_id":"7"}"#)
        #expect(Tap.line(for: PusherEvent(name: "x", channel: nil, data: nil)) == nil)
    }

    @Test func presenceLines() {
        let members = [PusherMember(userID: "a", userInfo: "{\"n\":1}"), PusherMember(userID: "b")]
        #expect(
            Tap.line(for: .subscriptionSucceeded(channel: "presence-x", members: members, me: nil))
                == #"{"channel":"presence-x","event":"pusher:subscription_succeeded","members":{"a":{"n":1},"b":{}}}"#)
        #expect(
            Tap.line(for: .memberRemoved(channel: "presence-x", member: PusherMember(userID: "a")))
                == #"{"channel":"presence-x","event":"pusher:member_removed","user_id":"a"}"#)
    }
}

/// Every labelled metric family has its zero series from the first scrape (docs/contract.md §5.7).
@Suite("Metrics: zero series")
struct ZeroSeriesTests {
    /// Bridge `name` with `rules` (a `[[bridge.rule]]` list).
    static func bridge(_ name: String, rules: String) throws -> BridgeSettings {
        let text = """
            [[bridge]]
            name = "\(name)"
            [bridge.pusher]
            key = "k"
            app_id = "1"
            secret = "s"
            [bridge.mqtt]
            host = "127.0.0.1"
            \(rules)
            """
        return try #require(
            ConfigLoader.parse(text, file: "b.conf", environment: .empty)
                .bridges.first)
    }

    @Test func everyFamilyAndRuleOutcomeIsInTheFirstScrape() throws {
        let settings = try Self.bridge(
            "f",
            rules: """
                [[bridge.rule]]
                name = "hot"
                from = "mqtt"
                topic = "t/+"
                channel = "c-{1}"
                event = "e"
                where = "/t > 1"
                throttle = "1s"
                [[bridge.rule]]
                name = "p"
                from = "pusher"
                channel = "c"
                topic = "x/{event}"
                on_change = true
                """)
        let metrics = BridgeMetrics()
        metrics.registerZeroSeries(for: settings)
        let scrape = String(decoding: metrics.render(), as: UTF8.self)
        for needle in [
            #"pusher_mqtt_bridge_reconnects_total{bridge="f",side="pusher"} 0"#,
            #"pusher_mqtt_bridge_reconnects_total{bridge="f",side="mqtt"} 0"#,
            #"pusher_mqtt_bridge_connection_up{bridge="f",side="mqtt"} 0"#,
            #"pusher_mqtt_bridge_buffered_messages{bridge="f",direction="mqtt_to_pusher"} 0"#,
            #"pusher_mqtt_bridge_spool_degraded{bridge="f",direction="pusher_to_mqtt"} 0"#,
            #"pusher_mqtt_bridge_spool_degraded{bridge="f",direction="mqtt_to_pusher"} 0"#,
            #"pusher_mqtt_bridge_errors_total{bridge="f",kind="spool"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="f",rule="hot",direction="mqtt_to_pusher",outcome="filtered"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="f",rule="hot",direction="mqtt_to_pusher",outcome="coalesced"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="f",rule="p",direction="pusher_to_mqtt",outcome="unchanged"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="f",rule="p",direction="pusher_to_mqtt",outcome="delivered"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="f",rule="",direction="pusher_to_mqtt",outcome="unmatched"} 0"#,
            #"pusher_mqtt_bridge_throttle_targets{bridge="f",rule="hot"} 0"#,
        ] {
            #expect(scrape.contains(needle), "missing \(needle)")
        }
        #expect(!scrape.contains(#"rule="p",direction="pusher_to_mqtt",outcome="coalesced""#))
    }

    @Test func everyErrorKindUsedInTheDaemonIsRegistered() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("Sources/BridgeDaemon")
        let files = try #require(FileManager.default.enumerator(atPath: directory.path)).compactMap { $0 as? String }
        var kinds = Set<String>()
        for file in files where file.hasSuffix(".swift") {
            let source = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for match in source.matches(of: /errors\(bridge: name, kind: "([a-z_]+)"\)/) { kinds.insert(String(match.1)) }
        }
        #expect(!kinds.isEmpty)
        #expect(kinds.isSubset(of: Set(BridgeMetrics.errorKinds)), "not registered: \(kinds.subtracting(BridgeMetrics.errorKinds))")
    }

    /// Issue 26: a rules-only reload registers the new rules' series but must not reset the running
    /// bridge's gauges: `connection_up` read 0 after every such reload while both sides were up.
    @Test func aRulesOnlyReloadKeepsTheGaugesOfTheRunningBridge() throws {
        func settings(_ extra: String) throws -> BridgeSettings {
            try Self.bridge(
                "g", rules: "[[bridge.rule]]\nname = \"a\"\nfrom = \"mqtt\"\ntopic = \"t/+\"\nchannel = \"c-{1}\"\nevent = \"e\"\n" + extra)
        }
        let metrics = BridgeMetrics()
        metrics.registerZeroSeries(for: try settings(""))
        metrics.connectionUp(bridge: "g", side: .pusher).record(1)
        metrics.connectionUp(bridge: "g", side: .mqtt).record(1)
        metrics.buffered(bridge: "g", direction: .mqttToPusher).record(7)
        let throttled =
            "[[bridge.rule]]\nname = \"b\"\nfrom = \"mqtt\"\ntopic = \"u/+\"\nchannel = \"d-{1}\"\nevent = \"e\"\nthrottle = \"1s\""
        metrics.registerZeroSeries(for: try settings(throttled), keepingReadings: true)
        let scrape = String(decoding: metrics.render(), as: UTF8.self)
        for needle in [
            #"pusher_mqtt_bridge_connection_up{bridge="g",side="pusher"} 1"#,
            #"pusher_mqtt_bridge_connection_up{bridge="g",side="mqtt"} 1"#,
            #"pusher_mqtt_bridge_buffered_messages{bridge="g",direction="mqtt_to_pusher"} 7"#,
            #"pusher_mqtt_bridge_throttle_targets{bridge="g",rule="b"} 0"#,
            #"pusher_mqtt_bridge_messages_total{bridge="g",rule="b",direction="mqtt_to_pusher",outcome="coalesced"} 0"#,
        ] {
            #expect(scrape.contains(needle), "missing \(needle)")
        }
        // A new runtime (start, or a restart) starts from zero: nothing is connected yet.
        metrics.registerZeroSeries(for: try settings(throttled))
        #expect(
            String(decoding: metrics.render(), as: UTF8.self).contains(#"pusher_mqtt_bridge_connection_up{bridge="g",side="pusher"} 0"#))
    }
}
