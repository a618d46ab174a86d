import BridgeCore
import Foundation
import Logging
import Testing

@testable import BridgeDaemon

/// The outbox hands out the items it was given (not decoded copies of their records) and
/// acknowledges a batch under one lock: the same messages, order and outcomes either way.
@Suite struct OutboxHandOutTests {
    static func outbox(maxMessages: Int, overflow: BufferOverflowPolicy, spoolDirectory: String? = nil) throws -> Outbox<OutgoingMQTT> {
        try Outbox<OutgoingMQTT>(
            name: "t", limits: BufferLimits(maxMessages: maxMessages, maxBytes: 1 << 20), overflow: overflow,
            spoolDirectory: spoolDirectory, logger: Logger(label: "t"))
    }

    static func item(_ n: Int) -> OutgoingMQTT {
        OutgoingMQTT(
            publish: MQTTPublish(
                rule: "r", topic: "t/\(n)", payload: Array("m\(n)".utf8), qos: 1, retain: false, userProperties: [.init("n", "\(n)")]),
            receivedAtMillis: Int64(n))
    }

    @Test(arguments: [false, true])
    func dropOldestHandsOutExactlyTheSurvivorsInOrder(spooled: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("handout-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outbox = try Self.outbox(maxMessages: 4, overflow: .dropOldest, spoolDirectory: spooled ? directory : nil)
        for n in 0..<3 { outbox.append(Self.item(n)) }
        #expect(await outbox.next(max: 1).map(\.item) == [Self.item(0)])
        // 0 is in flight; 1 and 2 wait; 3…6 push out the oldest (0 and 1, then 2).
        let admissions = outbox.append(contentsOf: (3..<7).map(Self.item))
        #expect(admissions.map(\.dropped).reduce(0, +) == 3)
        let next = await outbox.next(max: 10)
        #expect(next.map(\.item) == (3..<7).map(Self.item))
        #expect(zip(next, next.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
    }

    @Test func moreThanTheRememberedItemsAreDecodedFromTheirRecords() async throws {
        let count = Outbox<OutgoingMQTT>.freshLimit + 10
        let outbox = try Self.outbox(maxMessages: count, overflow: .dropOldest)
        _ = outbox.append(contentsOf: (0..<count).map(Self.item))
        let entries = await outbox.next(max: count)
        #expect(entries.map(\.item) == (0..<count).map(Self.item))
    }

    /// Large messages are remembered only up to the byte limit: a backlog of them is not held twice.
    @Test func largeItemsAreRememberedOnlyUpToTheByteLimit() async throws {
        let large = { (n: Int) in
            OutgoingMQTT(
                publish: MQTTPublish(
                    rule: "r", topic: "t/\(n)", payload: [UInt8](repeating: UInt8(n % 251), count: 8_192), qos: 1, retain: false),
                receivedAtMillis: Int64(n))
        }
        let outbox = try Self.outbox(maxMessages: 100, overflow: .dropOldest)
        _ = outbox.append(contentsOf: (0..<100).map(large))
        #expect(outbox.rememberedBytes > 0)
        #expect(outbox.rememberedBytes <= Outbox<OutgoingMQTT>.freshByteLimit)
        #expect(outbox.rememberedBytes < 100 * 8_192 / 2)
        let entries = await outbox.next(max: 100)
        #expect(entries.map(\.item) == (0..<100).map(large))
        #expect(outbox.rememberedBytes == 0)
    }

    @Test func aBatchOfAcknowledgementsEmptiesTheOutboxAndReportsWhatWasStillPending() async throws {
        let outbox = try Self.outbox(maxMessages: 3, overflow: .dropOldest)
        for n in 0..<3 { outbox.append(Self.item(n)) }
        let inFlight = await outbox.next(max: 3)
        outbox.append(Self.item(3))  // drops 0, which is in flight
        #expect(outbox.acknowledge(contentsOf: inFlight) == [false, true, true])
        #expect(outbox.pending == 1)
        let last = await outbox.next(max: 3)
        #expect(outbox.acknowledge(contentsOf: last) == [true])
        #expect(outbox.pending == 0)
        await outbox.waitUntilEmpty()
    }

    @Test func recordBytesAreLittleEndianLengthPrefixedFields() {
        let message = OutgoingMQTT(
            publish: MQTTPublish(rule: "r", topic: "é", payload: [7], qos: 1, retain: true, userProperties: [.init("k", "v")]),
            receivedAtMillis: 0x0102_0304_0506_0708)
        let expected: [UInt8] =
            [1]  // version
            + [1, 0, 0, 0] + Array("r".utf8) + [2, 0, 0, 0] + [0xC3, 0xA9] + [1, 0, 0, 0, 7]
            + [1, 0, 0, 0, 0, 0, 0, 0] + [1, 0, 0, 0, 0, 0, 0, 0] + [8, 7, 6, 5, 4, 3, 2, 1] + [1, 0, 0, 0, 0, 0, 0, 0]
            + [1, 0, 0, 0] + Array("k".utf8) + [1, 0, 0, 0] + Array("v".utf8)
        #expect(message.encoded() == expected)
        #expect(OutgoingMQTT.decode(expected) == message)
    }
}
