import BridgeCore
import Durability
import Foundation
import Logging
import PusherChannels
import Testing

@testable import BridgeDaemon

/// `Outbox.sync()` waits for the disk without the outbox lock: a sync held in the middle of its
/// flush must not stop appends, hand-outs or acknowledgements.
@Suite(.timeLimit(.minutes(1))) struct OutboxSyncTests {
    static func item(_ n: Int) -> OutgoingPusher {
        OutgoingPusher(
            event: PusherEventPublish(rule: "r", channel: "c", event: "e", data: "m\(n)", via: .http), receivedAtMillis: Int64(n))
    }

    @Test func appendsProceedWhileASyncIsFlushing() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let limits = BufferLimits(maxMessages: 100, maxBytes: 1 << 20)
        // The flush reports that it started, then waits until the test lets it go on.
        let (started, flushStarted) = AsyncStream.makeStream(of: UInt64.self)
        let (gate, openGate) = AsyncStream.makeStream(of: Void.self)
        let outbox = try Outbox<OutgoingPusher>(
            name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: Logger(label: "t"),
            flushSpool: { point in
                flushStarted.yield(point.lastSequence)
                for await _ in gate {}
                try await point.flushOnSyncThread()
            })
        for n in 0..<2 { outbox.append(Self.item(n)) }
        async let syncing: Void = outbox.sync()
        var startedAt = started.makeAsyncIterator()
        #expect(await startedAt.next() == 2)

        // The sync is in the middle of its flush: the outbox still takes, hands out and forgets messages.
        #expect(outbox.append(Self.item(2)) == OutboxAdmission())
        #expect(outbox.append(contentsOf: [Self.item(3), Self.item(4)]) == [OutboxAdmission(), OutboxAdmission()])
        let taken = await outbox.next(max: 10)
        #expect(taken.map(\.item.event.data) == ["m0", "m1", "m2", "m3", "m4"])
        outbox.acknowledge(taken[0])
        #expect(outbox.pending == 4)

        openGate.finish()
        await syncing
        await outbox.closeSpool()
        let reopened = try Outbox<OutgoingPusher>(
            name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: Logger(label: "t"))
        #expect(await reopened.next(max: 10).map(\.item.event.data) == ["m1", "m2", "m3", "m4"])
        await reopened.closeSpool()
    }
}
