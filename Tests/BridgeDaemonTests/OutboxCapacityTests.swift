import BridgeCore
import Testing

@testable import BridgeDaemon

/// The outbox's memory for the hand-out gives a burst's storage back once the burst was handed
/// out (a deque keeps the capacity of its largest size otherwise: a suspect for the soak's steps
/// of anonymous memory, issue 27). Its capacity is not public, so the peak it is released from is
/// what is observed.
@Suite struct OutboxCapacityTests {
    @Test func aDrainedBurstReleasesTheStorageOfTheHandOut() async throws {
        let count = Outbox<OutgoingMQTT>.freshRetained * 4
        let outbox = try OutboxHandOutTests.outbox(maxMessages: count, overflow: .dropOldest)
        _ = outbox.append(contentsOf: (0..<count).map(OutboxHandOutTests.item))
        #expect(outbox.rememberedPeak == count)
        let entries = await outbox.next(max: count)
        #expect(entries.map(\.item) == (0..<count).map(OutboxHandOutTests.item))
        #expect(outbox.rememberedBytes == 0)
        #expect(outbox.rememberedPeak == 0)
    }

    @Test func aSmallQueueKeepsItsStorage() async throws {
        let outbox = try OutboxHandOutTests.outbox(maxMessages: 100, overflow: .dropOldest)
        _ = outbox.append(contentsOf: (0..<3).map(OutboxHandOutTests.item))
        #expect(await outbox.next(max: 10).count == 3)
        #expect(outbox.rememberedPeak == 3)
    }
}
