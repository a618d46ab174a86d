import BridgeVocabulary
import Testing

@testable import Durability

/// A held message costs its own size in memory, not the capacity its producer grew it to
/// (Benchmarks/results/memory: 64 MiB of 8 KB messages).
@Suite("DeliveryBacklog spare capacity")
struct DeliveryBacklogCapacityTests {
    /// A payload grown by appends as the record encoders grow theirs: the message, then four 8-byte
    /// fields (more than malloc's rounding leaves spare), so the last appends double the capacity.
    static func grownPayload(count: Int) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(128)
        payload.append(contentsOf: (0..<count - 32).map { UInt8(truncatingIfNeeded: $0) })
        for field in 0..<4 { payload.append(contentsOf: [UInt8](repeating: UInt8(field), count: 8)) }
        return payload
    }

    @Test func payloadWithPagesOfSpareCapacityIsKeptAtItsOwnSize() throws {
        let payload = Self.grownPayload(count: 8200)
        try #require(payload.capacity - payload.count >= 4096)
        let backlog = DeliveryBacklog(limits: BufferLimits(maxMessages: 10, maxBytes: 1 << 20), overflow: .dropOldest)
        #expect(try backlog.enqueue(payload) == .stored(sequence: 1))
        let held = try #require(try backlog.pending(limit: 1).first)
        #expect(held.payload == payload)
        #expect(held.payload.capacity - held.payload.count < 4096)
        #expect(backlog.byteCount == 8200)
    }

    @Test func payloadWithLittleSpareCapacityIsKeptAsItIs() {
        var payload = [UInt8](repeating: 7, count: 1000)
        payload.reserveCapacity(3000)
        let kept = DeliveryBacklog.withoutSpareCapacity(payload)
        #expect(kept == payload)
        #expect(kept.capacity == payload.capacity)  // not copied: shares the producer's storage
    }

    @Test func emptyPayloadWithLargeCapacityBecomesAnEmptyArray() {
        var payload: [UInt8] = []
        payload.reserveCapacity(10_000)
        let kept = DeliveryBacklog.withoutSpareCapacity(payload)
        #expect(kept.isEmpty)
        #expect(kept.capacity < 4096)
    }

    /// The copy keeps every byte value, in order.
    @Test func copyKeepsEveryByte() {
        var payload: [UInt8] = []
        payload.reserveCapacity(20_000)
        for round in 0..<40 { payload.append(contentsOf: (0...255).map { UInt8($0) ^ UInt8(round) }) }
        let kept = DeliveryBacklog.withoutSpareCapacity(payload)
        #expect(kept == payload)
        #expect(kept.count == 10_240)
    }
}
