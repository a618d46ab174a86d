import BridgeVocabulary
import Foundation
import PropertyBased
import Testing

@testable import Durability

/// The storages a backlog can use; every behaviour test runs against both.
enum BacklogStorage: String, CaseIterable, Sendable {
    case memory
    case spool
}

@Suite("DeliveryBacklog: bounded, counted, in memory or spooled")
struct DeliveryBacklogTests {
    func withBacklog<T>(
        _ storage: BacklogStorage,
        limits: BufferLimits,
        overflow: BufferOverflowPolicy,
        _ body: (DeliveryBacklog) throws -> T
    ) throws -> T {
        switch storage {
        case .memory:
            return try body(DeliveryBacklog(limits: limits, overflow: overflow))
        case .spool:
            return try withTemporaryDirectory { directory in
                let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 512))
                defer { try? spool.close() }
                return try body(DeliveryBacklog(limits: limits, overflow: overflow, spool: spool))
            }
        }
    }

    @Test("FIFO delivery with out-of-order acknowledgements", arguments: BacklogStorage.allCases)
    func fifo(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: .init(maxMessages: 100, maxBytes: 10_000), overflow: .dropOldest) {
            (backlog: DeliveryBacklog) throws -> Void in
            for index in 1...5 as ClosedRange<UInt64> {
                #expect(try backlog.enqueue(payload(for: index)) == .stored(sequence: index))
            }
            #expect(try backlog.pending(limit: 10).map(\.sequence) == [1, 2, 3, 4, 5])
            #expect(try backlog.acknowledge(2))
            #expect(try backlog.pending(limit: 10).map(\.sequence) == [1, 3, 4, 5])
            #expect(try backlog.pending(after: 3, limit: 1).map(\.sequence) == [4])
            #expect(try backlog.acknowledge(1))
            #expect(try !backlog.acknowledge(1))
            #expect(
                try backlog.pending(limit: 10) == (3...5).map { SpoolRecord(sequence: $0, payload: payload(for: $0)) }
            )
            #expect(backlog.count == 3)
            #expect(backlog.counters.removed == 2)
        }
    }

    @Test("drop-oldest: exact drops by count, dropped messages are never delivered", arguments: BacklogStorage.allCases)
    func dropOldest(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: .init(maxMessages: 3, maxBytes: 10_000), overflow: .dropOldest) {
            (backlog: DeliveryBacklog) throws -> Void in
            var dropped: [UInt64] = []
            for index in 1...10 as ClosedRange<UInt64> {
                switch try backlog.enqueue(payload(for: index, size: 10)) {
                case .stored: break
                case .storedDroppingOldest(let sequence, let oldest):
                    #expect(sequence == index)
                    dropped += oldest
                case .droppedNewest, .droppedOversize: Issue.record("unexpected drop of \(index)")
                }
            }
            #expect(dropped == Array(1...7))
            #expect(backlog.counters.droppedOldest == 7)
            #expect(try backlog.pending(limit: 10).map(\.sequence) == [8, 9, 10])
            #expect(try !backlog.acknowledge(3), "a dropped message's late acknowledgement is a no-op")
        }
    }

    @Test("drop-oldest by bytes evicts as many as needed", arguments: BacklogStorage.allCases)
    func dropOldestByBytes(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: .init(maxMessages: 100, maxBytes: 100), overflow: .dropOldest) {
            (backlog: DeliveryBacklog) throws -> Void in
            for index in 1...10 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: index, size: 10)) }
            #expect(
                try backlog.enqueue(payload(for: 11, size: 35))
                    == .storedDroppingOldest(sequence: 11, dropped: [1, 2, 3, 4])
            )
            #expect(backlog.byteCount == 95)
            #expect(backlog.count == 7)
        }
    }

    @Test("drop-newest and oversize: refused and counted, nothing stored", arguments: BacklogStorage.allCases)
    func dropNewest(storage: BacklogStorage) throws {
        try withBacklog(storage, limits: .init(maxMessages: 2, maxBytes: 100), overflow: .dropNewest) {
            (backlog: DeliveryBacklog) throws -> Void in
            #expect(try backlog.enqueue(payload(for: 1, size: 10)) == .stored(sequence: 1))
            #expect(try backlog.enqueue(payload(for: 2, size: 10)) == .stored(sequence: 2))
            #expect(try backlog.enqueue(payload(for: 3, size: 10)) == .droppedNewest)
            #expect(try backlog.enqueue(payload(for: 4, size: 101)) == .droppedOversize)
            #expect(try backlog.acknowledge(1))
            #expect(try backlog.enqueue(payload(for: 5, size: 10)) == .stored(sequence: 3))
            #expect(
                backlog.counters
                    == BufferCounters(stored: 3, removed: 1, droppedOldest: 0, droppedNewest: 1, droppedOversize: 1)
            )
        }
    }

    @Test("a persistent backlog survives a restart without the messages it dropped or delivered")
    func persistentRestart() throws {
        try withTemporaryDirectory { directory in
            let limits = BufferLimits(maxMessages: 4, maxBytes: 1000)
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                let backlog = DeliveryBacklog(limits: limits, overflow: .dropOldest, spool: spool)
                for index in 1...6 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: index)) }
                try backlog.acknowledge(4)
                // Crash: no close.
            }
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            let backlog = DeliveryBacklog(limits: limits, overflow: .dropOldest, spool: spool)
            // 1 and 2 were dropped (acknowledged in the spool) and stay gone; 4 was delivered
            // above the watermark, so at-least-once brings it back.
            #expect(try backlog.pending(limit: 10).map(\.sequence) == [3, 4, 5, 6])
            #expect(backlog.count == 4)
        }
    }

    @Test("memory and spool storage make identical decisions for random traffic", .timeLimit(.minutes(1)))
    func storagesAgree() async throws {
        await propertyCheck(count: 40, input: Gen.int(in: 0...999).array(of: 1...200), Gen.bool) {
            operations,
            dropOldest in
            do {
                try withTemporaryDirectory { directory in
                    let limits = BufferLimits(maxMessages: 6, maxBytes: 200)
                    let policy: BufferOverflowPolicy = dropOldest ? .dropOldest : .dropNewest
                    let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 256))
                    let persistent = DeliveryBacklog(limits: limits, overflow: policy, spool: spool)
                    let inMemory = DeliveryBacklog(limits: limits, overflow: policy)
                    for operation in operations {
                        if operation % 3 == 0 {
                            let oldest = try inMemory.pending(limit: 1).first?.sequence ?? 0
                            let sequence = oldest + UInt64(operation % 4)
                            #expect(try persistent.acknowledge(sequence) == inMemory.acknowledge(sequence))
                        } else {
                            let data = payload(for: UInt64(operation), size: operation % 70)
                            #expect(try persistent.enqueue(data) == inMemory.enqueue(data))
                        }
                        #expect(persistent.count == inMemory.count)
                        #expect(persistent.byteCount == inMemory.byteCount)
                        #expect(persistent.count <= limits.maxMessages)
                        #expect(persistent.byteCount <= limits.maxBytes)
                    }
                    #expect(try persistent.pending(limit: 100) == inMemory.pending(limit: 100))
                    #expect(persistent.counters == inMemory.counters)
                }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }
}
