import BridgeCore
import Locking
import Logging
import Testing

@testable import BridgeDaemon

/// The stop path waits for the outboxes to empty on a wake-up, not by polling.
@Suite struct OutboxDrainTests {
    static func outbox() throws -> Outbox<OutgoingPusher> {
        try Outbox<OutgoingPusher>(
            name: "t", limits: BufferLimits(maxMessages: 100, maxBytes: 1 << 20), overflow: .dropOldest, spoolDirectory: nil,
            logger: Logger(label: "t"))
    }

    @Test func anEmptyOutboxDoesNotWait() async throws {
        let outbox = try Self.outbox()
        await outbox.waitUntilEmpty()
    }

    @Test func theWaiterWakesWhenTheLastMessageIsAcknowledged() async throws {
        let outbox = try Self.outbox()
        for n in 0..<2 { outbox.append(OutboxTests.item(n)) }
        let entries = await outbox.next(max: 2)
        let woken = Locked(false)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await outbox.waitUntilEmpty()
                woken.withLock { $0 = true }
            }
            outbox.acknowledge(entries[0])
            // One message is still pending: give the waiter every chance to (wrongly) return.
            for _ in 0..<50 { await Task.yield() }
            #expect(!woken.withLock { $0 })
            outbox.acknowledge(entries[1])
            await group.waitForAll()
        }
        #expect(woken.withLock { $0 })
    }

    @Test func cancellationEndsTheWait() async throws {
        let outbox = try Self.outbox()
        outbox.append(OutboxTests.item(0))
        let waiting = Task { await outbox.waitUntilEmpty() }
        waiting.cancel()
        await waiting.value
        #expect(outbox.pending == 1)
    }
}
