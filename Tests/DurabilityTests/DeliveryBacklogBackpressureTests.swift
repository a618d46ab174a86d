import BridgeVocabulary
import Testing

@testable import Durability

/// `overflow = "backpressure"`: nothing is dropped; the producer asks `hasRoom` first (docs/contract.md §7.6).
@Suite("DeliveryBacklog: backpressure")
struct DeliveryBacklogBackpressureTests {
    private func withBacklog<T>(_ storage: BacklogStorage, limits: BufferLimits, _ body: (DeliveryBacklog) throws -> T) throws -> T {
        switch storage {
        case .memory:
            return try body(DeliveryBacklog(limits: limits, overflow: .backpressure))
        case .spool:
            return try withTemporaryDirectory { directory in
                let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 512))
                defer { try? spool.close() }
                return try body(DeliveryBacklog(limits: limits, overflow: .backpressure, spool: spool))
            }
        }
    }

    @Test("room is counted in messages and bytes, and an empty backlog always has room", arguments: BacklogStorage.allCases)
    func room(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: BufferLimits(maxMessages: 3, maxBytes: 100)) { backlog in
            #expect(backlog.hasRoom(messages: 50, bytes: 10_000))  // empty: a burst over the limits still goes in
            _ = try backlog.enqueue(Array(repeating: 1, count: 40))
            #expect(backlog.hasRoom(messages: 2, bytes: 60))
            #expect(!backlog.hasRoom(messages: 3, bytes: 3))
            #expect(!backlog.hasRoom(messages: 1, bytes: 61))
        }
    }

    @Test("a full backpressure backlog stores over its limits instead of dropping", arguments: BacklogStorage.allCases)
    func neverDrops(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: BufferLimits(maxMessages: 2, maxBytes: 1_000)) { backlog in
            var admissions: [BacklogAdmission] = []
            for n in 0..<5 { admissions.append(try backlog.enqueue([UInt8(n)])) }
            #expect(admissions.allSatisfy { if case .stored = $0 { true } else { false } })
            #expect(backlog.count == 5)
            #expect(backlog.counters.droppedOldest == 0 && backlog.counters.droppedNewest == 0)
            #expect(try backlog.pending(limit: 10).map(\.payload) == (0..<5).map { [UInt8($0)] })
            #expect(!backlog.hasRoom(messages: 1, bytes: 1))
            for record in try backlog.pending(limit: 4) { try backlog.acknowledge(record.sequence) }
            #expect(backlog.hasRoom(messages: 1, bytes: 1))
        }
    }

    @Test("a message larger than max_bytes alone is still refused as oversize")
    func oversize() throws {
        try withBacklog(.memory, limits: BufferLimits(maxMessages: 2, maxBytes: 10)) { backlog in
            let admission = try backlog.enqueue(Array(repeating: 0, count: 11))
            #expect(admission == .droppedOversize)
        }
    }
}
