import BridgeCore
import Locking
import Logging
import Testing

@testable import BridgeDaemon

/// `backpressure`: the MQTT → Pusher producer waits for room instead of dropping (docs/contract.md §7.6).
@Suite struct OutboxRoomTests {
    static func outbox(maxMessages: Int = 4) throws -> Outbox<OutgoingPusher> {
        try Outbox<OutgoingPusher>(
            name: "t", limits: BufferLimits(maxMessages: maxMessages, maxBytes: 1 << 20), overflow: .backpressure,
            spoolDirectory: nil, logger: Logger(label: "t"))
    }

    @Test func aBurstWaitsUntilTheAcknowledgementsMakeRoomAndNothingIsDropped() async throws {
        let outbox = try Self.outbox()
        #expect(outbox.append(contentsOf: (0..<3).map(OutboxTests.item)).allSatisfy { $0 == OutboxAdmission() })
        let admitted = Locked(false)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await outbox.waitForRoom(messages: 3, bytes: 30)
                let admissions = outbox.append(contentsOf: (3..<6).map(OutboxTests.item))
                #expect(admissions.allSatisfy { $0 == OutboxAdmission() })
                admitted.withLock { $0 = true }
            }
            while !outbox.isWaitingForRoom { await Task.yield() }
            let entries = await outbox.next(max: 3)
            outbox.acknowledge(entries[0])  // 2 pending + 3 > 4: still no room
            for _ in 0..<50 { await Task.yield() }
            #expect(!admitted.withLock { $0 })
            outbox.acknowledge(entries[1])  // 1 + 3 ≤ 4
            await group.waitForAll()
        }
        #expect(admitted.withLock { $0 })
        #expect(outbox.pending == 4)
        #expect(await outbox.next(max: 10).map(\.item.event.data) == ["m3", "m4", "m5"])
    }

    @Test func aBurstLargerThanTheLimitGoesIntoAnEmptyOutbox() async throws {
        let outbox = try Self.outbox(maxMessages: 2)
        await outbox.waitForRoom(messages: 5, bytes: 50)
        let admissions = outbox.append(contentsOf: (0..<5).map(OutboxTests.item))
        #expect(admissions.count == 5 && admissions.allSatisfy { $0.dropped == 0 })
        #expect(outbox.pending == 5)
    }

    @Test func cancellationAndCloseEndTheWaitAndStoreOverTheLimit() async throws {
        let outbox = try Self.outbox(maxMessages: 2)
        _ = outbox.append(contentsOf: (0..<2).map(OutboxTests.item))
        let cancelled = Task {
            await outbox.waitForRoom(messages: 1, bytes: 10)
            return outbox.append(contentsOf: [OutboxTests.item(2)])
        }
        while !outbox.isWaitingForRoom { await Task.yield() }
        cancelled.cancel()
        #expect(await cancelled.value == [OutboxAdmission()])
        #expect(outbox.pending == 3)  // over the limit, not dropped
        let closing = Task {
            await outbox.waitForRoom(messages: 1, bytes: 10)
            return outbox.append(contentsOf: [OutboxTests.item(3)])
        }
        while !outbox.isWaitingForRoom { await Task.yield() }
        outbox.close()
        #expect(await closing.value == [OutboxAdmission()])
        #expect(outbox.pending == 4)
        #expect(!outbox.isWaitingForRoom)
    }

    /// Issue 26: a reload that moves the MQTT → Pusher overflow default changes the policy in place.
    /// A producer waiting for room under `backpressure` goes on (and the outbox drops the oldest)
    /// once the policy is `drop-oldest`; back to `backpressure`, producers wait again.
    @Test func aPolicyChangedInPlaceReleasesAWaitingProducerAndTakesEffectAtOnce() async throws {
        let outbox = try Self.outbox(maxMessages: 2)
        _ = outbox.append(contentsOf: (0..<2).map(OutboxTests.item))
        let waiting = Task {
            await outbox.waitForRoom(messages: 1, bytes: 10)
            return outbox.append(contentsOf: [OutboxTests.item(2)])
        }
        while !outbox.isWaitingForRoom { await Task.yield() }
        outbox.changeOverflow(to: .dropOldest)
        #expect(outbox.overflow == .dropOldest)
        #expect(await waiting.value == [OutboxAdmission(dropped: 1)])
        #expect(outbox.pending == 2)
        #expect(await outbox.next(max: 10).map(\.item.event.data) == ["m1", "m2"])

        outbox.changeOverflow(to: .backpressure)
        #expect(outbox.overflow == .backpressure)
        let blocked = Task { await outbox.waitForRoom(messages: 1, bytes: 10) }
        while !outbox.isWaitingForRoom { await Task.yield() }
        outbox.close()
        await blocked.value
    }
}
