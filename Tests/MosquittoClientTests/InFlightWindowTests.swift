import Testing

@testable import MosquittoClient

@Suite struct InFlightWindowTests {
    @Test func earlyAcknowledgementIsHandedToBind() {
        var table = AckTable<String, Int32>()
        // PUBACK for mid 7 arrives before the publisher recorded mid 7.
        #expect(table.acknowledged(7, 0) == nil)
        #expect(table.bind(7, "first") == 0)
        #expect(table.count == 0)
        // The normal order.
        #expect(table.bind(8, "second") == nil)
        #expect(table.count == 1)
        #expect(table.acknowledged(8, 0x10) == "second")
        #expect(table.count == 0)
    }

    @Test func removeAllWhereKeepsTheRest() {
        var table = AckTable<Int, Int32>()
        for mid in 1...6 { _ = table.bind(Int32(mid), mid) }
        let removed = table.removeAll { $0 % 2 == 0 }.sorted()
        #expect(removed == [2, 4, 6])
        #expect(table.count == 3)
        #expect(table.acknowledged(3, 0) == 3)
    }

    @Test func windowIsBoundedAndHandsFreedSlotsToWaitersInOrder() {
        var window = InFlightWindow<Void, String>(limit: 2)
        let a = window.tryReserve()
        let b = window.tryReserve()
        #expect(a?.rawValue == 1 && b?.rawValue == 2)
        #expect(window.tryReserve() == nil)
        #expect(window.reserveOrWait(token: 1, "first waiter") == nil)
        #expect(window.reserveOrWait(token: 2, "second waiter") == nil)
        #expect(window.waiterCount == 2)
        // A free slot goes to the oldest waiter, with a fresh id; usage stays at the limit.
        let handoff = window.releaseSlot()
        #expect(handoff.map(\.0) == ["first waiter"])
        #expect(handoff.map(\.1.rawValue) == [3])
        #expect(window.used == 2)
        // A cancelled waiter leaves the queue.
        #expect(window.cancelWait(token: 2) == "second waiter")
        #expect(window.cancelWait(token: 2) == nil)
        #expect(window.releaseSlot().isEmpty)
        #expect(window.used == 1)
        // No overtaking: while someone waits, tryReserve does not take the slot.
        _ = window.tryReserve()
        #expect(window.reserveOrWait(token: 3, "third") == nil)
        #expect(window.tryReserve() == nil)
    }

    @Test func waitersAreWokenInBatchesOfAnEighthOfTheWindow() {
        var window = InFlightWindow<Void, Int>(limit: 16)
        for _ in 0..<16 { _ = window.tryReserve() }
        for token in 0..<3 { #expect(window.reserveOrWait(token: UInt64(token), token) == nil) }
        // One free slot is not enough (wakeBatch = 2) ...
        #expect(window.releaseSlot().isEmpty)
        #expect(window.used == 15)
        // ... two are: both go to the two oldest waiters.
        #expect(window.releaseSlot().map(\.0) == [0, 1])
        #expect(window.used == 16)
        #expect(window.waiterCount == 1)
    }

    @Test func removeAllWaitersEmptiesTheQueue() {
        var window = InFlightWindow<Void, Int>(limit: 1)
        _ = window.tryReserve()
        _ = window.reserveOrWait(token: 1, 10)
        _ = window.reserveOrWait(token: 2, 20)
        #expect(window.removeAllWaiters() == [10, 20])
        #expect(window.waiterCount == 0)
    }
}
