import BridgeVocabulary
import MQTTVocabulary
import Testing

@testable import Durability

/// The records a spool already holds on disk must read back after an upgrade: these bytes were
/// written by the daemon's encoders before the format moved from Sources/BridgeDaemon/Runtime/
/// OutgoingMessages.swift to Durability (commit 2a4ff7b), and are compared byte for byte both ways.
@Suite("Message record format: records written before the move")
struct MessageRecordFormatTests {
    static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    static let mqttRecord = bytes(
        hex: "01060000007072696365730e000000646173682f7072696365732fc3bc0300000000ff0a010000000000000001000000000000002bc90b00a2"
            + "01000002000000000000000e0000007075736865722d6368616e6e656c0b0000006d61726b65742d646174610c00000070757368"
            + "65722d6576656e74090000006e65772d7072696365")
    static let mqttPublish = MQTTPublish(
        rule: "prices", topic: "dash/prices/ü", payload: [0, 255, 10], qos: 1, retain: true,
        userProperties: [.init("pusher-channel", "market-data"), .init("pusher-event", "new-price")])

    static let pusherRecord = bytes(
        hex: "0101000000740800000073656e736f722d310b00000074656d70657261747572650b0000007b2276223a22e29883227d0c000000636c69"
            + "656e742d6576656e742a00000000000000")
    static let pusherEvent = PusherEventPublish(
        rule: "t", channel: "sensor-1", event: "temperature", data: "{\"v\":\"☃\"}", via: .clientEvent)

    static let emptyHTTPRecord = bytes(hex: "01010000007201000000630100000065000000000400000068747470ffffffffffffffff")

    @Test("an MQTT record written before the move decodes, and encodes to the same bytes")
    func mqtt() throws {
        let decoded = try #require(MessageRecordFormat.decodeMQTTPublish(Self.mqttRecord))
        #expect(decoded.publish == Self.mqttPublish)
        #expect(decoded.receivedAtMillis == 1_795_297_102_123)
        #expect(MessageRecordFormat.encode(Self.mqttPublish, receivedAtMillis: 1_795_297_102_123) == Self.mqttRecord)
    }

    @Test("a Pusher record written before the move decodes, and encodes to the same bytes")
    func pusher() throws {
        let decoded = try #require(MessageRecordFormat.decodePusherEvent(Self.pusherRecord))
        #expect(decoded.event == Self.pusherEvent)
        #expect(decoded.receivedAtMillis == 42)
        #expect(MessageRecordFormat.encode(Self.pusherEvent, receivedAtMillis: 42) == Self.pusherRecord)
        let empty = try #require(MessageRecordFormat.decodePusherEvent(Self.emptyHTTPRecord))
        #expect(empty.event == PusherEventPublish(rule: "r", channel: "c", event: "e", data: "", via: .http))
        #expect(empty.receivedAtMillis == -1)
    }

    @Test("a record of the other direction, truncated, extended or of another version is refused")
    func refused() {
        #expect(MessageRecordFormat.decodeMQTTPublish(Self.pusherRecord) == nil)
        #expect(MessageRecordFormat.decodePusherEvent(Self.mqttRecord) == nil)
        for cut in 0..<Self.mqttRecord.count { #expect(MessageRecordFormat.decodeMQTTPublish(Array(Self.mqttRecord[..<cut])) == nil) }
        #expect(MessageRecordFormat.decodeMQTTPublish(Self.mqttRecord + [0]) == nil)
        var version2 = Self.pusherRecord
        version2[0] = 2
        #expect(MessageRecordFormat.decodePusherEvent(version2) == nil)
    }

    @Test("records written before the move survive a spool's restart")
    func throughTheSpool() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                _ = try spool.append(contentsOf: [Self.mqttRecord, Self.pusherRecord])
                try spool.close()
            }
            let reopened = try Spool(directory: directory, configuration: testConfiguration())
            let records = try allPending(reopened)
            #expect(records.map(\.payload) == [Self.mqttRecord, Self.pusherRecord])
            #expect(MessageRecordFormat.decodeMQTTPublish(records[0].payload)?.publish == Self.mqttPublish)
            #expect(MessageRecordFormat.decodePusherEvent(records[1].payload)?.event == Self.pusherEvent)
            try reopened.close()
        }
    }
}
