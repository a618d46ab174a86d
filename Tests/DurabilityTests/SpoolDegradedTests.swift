import BridgeVocabulary
import Foundation
import Glibc
import PropertyBased
import Testing

@testable import Durability

/// A full or failing disk degrades the spool, not the data (docs/contract.md §7.6): the writes of
/// the spool's segment files fail on demand (`SpoolWriteFaults`, the file-write seam), and the
/// backlog keeps what the spool refused in its memory tail, within its limits, until the disk
/// takes writes again.
@Suite("DeliveryBacklog: a degraded spool keeps messages in memory")
struct SpoolDegradedTests {
    /// A backlog on a spool in a fresh directory whose writes `faults` controls.
    func withDegradableBacklog<T>(
        limits: BufferLimits = .init(maxMessages: 1_000, maxBytes: 1 << 20),
        overflow: BufferOverflowPolicy = .dropOldest,
        fsync: SpoolFsyncPolicy = .never,
        segmentBytes: Int = 1 << 20,
        _ body: (DeliveryBacklog, Spool, SpoolWriteFaults, String) throws -> T
    ) throws -> T {
        try withTemporaryDirectory { directory in
            let faults = SpoolWriteFaults()
            var configuration = testConfiguration(segmentBytes: segmentBytes, fsync: fsync)
            configuration.writeFaults = faults
            let spool = try Spool(directory: directory, configuration: configuration)
            defer { try? spool.close() }
            return try body(DeliveryBacklog(limits: limits, overflow: overflow, spool: spool), spool, faults, directory)
        }
    }

    /// The records a fresh spool finds in a copy of `directory` taken now: what a crash of the
    /// process at this moment would leave (the files as the kernel has them).
    func recoveredAfterCrash(of directory: String) throws -> [SpoolRecord] {
        try withTemporaryDirectory { copy in
            for name in try fileNames(in: directory) where name.hasSuffix(".seg") {
                try FileManager.default.copyItem(atPath: directory + "/" + name, toPath: copy + "/" + name)
            }
            let spool = try Spool(directory: copy, configuration: testConfiguration())
            defer { try? spool.close() }
            #expect(spool.recovery.damage.isEmpty)
            return try allPending(spool)
        }
    }

    func records(_ sequences: [UInt64]) -> [SpoolRecord] {
        sequences.map { SpoolRecord(sequence: $0, payload: payload(for: $0, size: 10)) }
    }

    @Test("a failed write keeps the message in memory under the next sequence; reads and acks cross the boundary")
    func failureToMemoryTail() throws {
        try withDegradableBacklog { (backlog, spool, faults, directory) throws in
            for sequence in 1...3 as ClosedRange<UInt64> {
                #expect(try backlog.enqueue(payload(for: sequence, size: 10)) == .stored(sequence: sequence))
            }
            let onDisk = try segmentBytesOnDisk(directory)
            faults.failWrites(errno: ENOSPC)
            for sequence in 4...6 as ClosedRange<UInt64> {
                #expect(try backlog.enqueue(payload(for: sequence, size: 10)) == .stored(sequence: sequence))
            }
            #expect(backlog.isSpoolDegraded)
            #expect(backlog.spoolFailure?.isDiskFailure == true)
            #expect(backlog.count == 6)
            #expect(backlog.byteCount == 60)
            #expect(backlog.memoryOnlyCount == 3)
            #expect(spool.lastSequence == 3)
            // Degraded: one failed write, not one per message.
            #expect(faults.failedWrites == 1)
            #expect(try segmentBytesOnDisk(directory) == onDisk)

            #expect(try backlog.pending(limit: 10) == records([1, 2, 3, 4, 5, 6]))
            #expect(try backlog.pending(after: 2, limit: 2) == records([3, 4]))
            #expect(try backlog.pending(after: 4, limit: 10) == records([5, 6]))
            #expect(try backlog.pending(after: 6, limit: 10).isEmpty)
            #expect(try backlog.pending(after: .max, limit: 10).isEmpty)

            #expect(try backlog.acknowledge(5))
            #expect(try backlog.acknowledge(2))
            #expect(try !backlog.acknowledge(5))
            #expect(try !backlog.acknowledge(7))
            #expect(try !backlog.acknowledge(0))
            #expect(try backlog.pending(limit: 10) == records([1, 3, 4, 6]))
            #expect(backlog.memoryOnlyCount == 2)
            #expect(backlog.count == 4)

            // A message appended now is in memory too, and a crash now keeps only the spool's part
            // (2, acknowledged above the watermark, comes again: at-least-once).
            #expect(try backlog.enqueue(payload(for: 7, size: 10)) == .stored(sequence: 7))
            #expect(try recoveredAfterCrash(of: directory) == records([1, 2, 3]))
        }
    }

    @Test("a torn write is cut back, so the spool on disk stays valid")
    func tornWriteCutBack() throws {
        try withDegradableBacklog { (backlog, _, faults, directory) throws in
            _ = try backlog.enqueue(payload(for: 1, size: 10))
            let onDisk = try segmentBytesOnDisk(directory)
            faults.failWrites(errno: EIO, bytesBeforeFailure: 25)
            #expect(try backlog.enqueue(payload(for: 2, size: 10)) == .stored(sequence: 2))
            #expect(backlog.isSpoolDegraded)
            #expect(try segmentBytesOnDisk(directory) == onDisk)
            #expect(try recoveredAfterCrash(of: directory) == records([1]))
        }
    }

    @Test("recovery writes the tail into the spool in order; a restart finds everything pending")
    func recoveryMovesTailInOrder() throws {
        try withTemporaryDirectory { directory in
            let faults = SpoolWriteFaults()
            var configuration = testConfiguration(segmentBytes: 200)
            configuration.writeFaults = faults
            do {
                let spool = try Spool(directory: directory, configuration: configuration)
                let backlog = DeliveryBacklog(limits: .init(maxMessages: 100, maxBytes: 10_000), overflow: .dropOldest, spool: spool)
                for sequence in 1...2 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 10)) }
                faults.failWrites()
                for sequence in 3...12 as ClosedRange<UInt64> {
                    #expect(try backlog.enqueue(payload(for: sequence, size: 10)) == .stored(sequence: sequence))
                }
                // Acknowledged from the tail: its head (3, 4), one in the middle (8).
                for sequence: UInt64 in [3, 4, 8] { #expect(try backlog.acknowledge(sequence)) }
                // Still failing: nothing moves, nothing is lost.
                #expect(!backlog.resumeSpool())
                #expect(backlog.isSpoolDegraded)
                #expect(backlog.memoryOnlyCount == 7)
                let before = try backlog.pending(limit: 100)
                #expect(before == records([1, 2, 5, 6, 7, 9, 10, 11, 12]))

                faults.heal()
                #expect(backlog.resumeSpool())
                #expect(!backlog.isSpoolDegraded)
                #expect(backlog.spoolFailure == nil)
                #expect(backlog.memoryOnlyCount == 0)
                #expect(spool.lastSequence == 12)
                #expect(try backlog.pending(limit: 100) == before)
                #expect(backlog.count == 9)
                #expect(backlog.byteCount == 90)
                // Rotation happened on the way (200-byte segments): the spool stays contiguous.
                #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count > 1)
                // New messages go to the spool again.
                #expect(try backlog.enqueue(payload(for: 13, size: 10)) == .stored(sequence: 13))
                #expect(spool.lastSequence == 13)
                #expect(try backlog.acknowledge(5))
                try spool.close()
            }
            // Acknowledgements above the watermark (1 and 2 are pending) are not durable: after a
            // restart 5 comes again (at-least-once) and the placeholders of 3, 4 and 8 are found
            // empty, which the backlog drops.
            let reopened = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 200))
            defer { try? reopened.close() }
            #expect(reopened.recovery.damage.isEmpty)
            #expect(try allPending(reopened).map(\.sequence) == Array(1...13))
            let backlog = DeliveryBacklog(limits: .init(maxMessages: 100, maxBytes: 10_000), overflow: .dropOldest, spool: reopened)
            #expect(try backlog.pending(limit: 100) == records([1, 2, 5, 6, 7, 9, 10, 11, 12, 13]))
            #expect(backlog.count == 10)
        }
    }

    @Test("a tail whose every record was acknowledged is skipped, not written, and leaves nothing pending")
    func fullyAcknowledgedTail() throws {
        try withDegradableBacklog { (backlog, spool, faults, directory) throws in
            faults.failWrites()
            for sequence in 1...50 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 10)) }
            for sequence in 1...50 as ClosedRange<UInt64> { #expect(try backlog.acknowledge(sequence)) }
            #expect(backlog.count == 0)
            #expect(backlog.isSpoolDegraded)
            faults.heal()
            let bytesBefore = try segmentBytesOnDisk(directory)
            #expect(backlog.resumeSpool())
            #expect(spool.lastSequence == 50)
            #expect(spool.deliveredWatermark == 50)
            #expect(spool.pendingCount == 0)
            // The spool was all delivered (empty): the 50 are skipped, not written as placeholders.
            #expect(try segmentBytesOnDisk(directory) == bytesBefore)
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") } == ["00000000000000000051.seg"])
            #expect(try backlog.enqueue(payload(for: 51, size: 10)) == .stored(sequence: 51))
            #expect(try recoveredAfterCrash(of: directory) == records([51]))
        }
    }

    @Test("the limits and the overflow policy count the memory tail", arguments: [BufferOverflowPolicy.dropOldest, .dropNewest])
    func limitsApply(overflow: BufferOverflowPolicy) throws {
        try withDegradableBacklog(limits: .init(maxMessages: 4, maxBytes: 45), overflow: overflow) { (backlog, _, faults, _) throws in
            for sequence in 1...2 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 10)) }
            faults.failWrites()
            for sequence in 3...4 as ClosedRange<UInt64> {
                #expect(try backlog.enqueue(payload(for: sequence, size: 10)) == .stored(sequence: sequence))
            }
            #expect(try backlog.enqueue(payload(for: 99, size: 46)) == .droppedOversize)
            switch overflow {
            case .dropOldest:
                // Full by count and bytes: the oldest (on disk) goes first, then the tail's head.
                #expect(try backlog.enqueue(payload(for: 5, size: 10)) == .storedDroppingOldest(sequence: 5, dropped: [1]))
                #expect(try backlog.enqueue(payload(for: 6, size: 20)) == .storedDroppingOldest(sequence: 6, dropped: [2, 3]))
                #expect(try backlog.pending(limit: 10).map(\.sequence) == [4, 5, 6])
                #expect(backlog.counters.droppedOldest == 3)
            default:
                #expect(try backlog.enqueue(payload(for: 5, size: 10)) == .droppedNewest)
                #expect(try backlog.pending(limit: 10).map(\.sequence) == [1, 2, 3, 4])
                #expect(backlog.counters.droppedNewest == 1)
            }
            #expect(backlog.count <= 4)
            #expect(backlog.byteCount <= 45)
            faults.heal()
            #expect(backlog.resumeSpool())
            #expect(backlog.memoryOnlyCount == 0)
        }
    }

    @Test("a burst the spool refuses goes to memory whole, in order")
    func burstToMemory() throws {
        try withDegradableBacklog { (backlog, spool, faults, _) throws in
            _ = try backlog.enqueue(payload(for: 1, size: 10))
            faults.failWrites()
            let admissions = try backlog.enqueue(contentsOf: (2...5 as ClosedRange<UInt64>).map { payload(for: $0, size: 10) })
            #expect(admissions == (2...5 as ClosedRange<UInt64>).map { .stored(sequence: $0) })
            #expect(backlog.memoryOnlyCount == 4)
            #expect(spool.lastSequence == 1)
            // Degraded: a later burst does not try the disk again.
            _ = try backlog.enqueue(contentsOf: [payload(for: 6, size: 10), payload(for: 7, size: 10)])
            #expect(faults.failedWrites == 1)
            #expect(try backlog.pending(limit: 10) == records([1, 2, 3, 4, 5, 6, 7]))
        }
    }

    @Test("a failed fdatasync degrades too: the record it covered is in the spool, the next waits in memory")
    func flushFailure() throws {
        try withDegradableBacklog(fsync: .always) { (backlog, spool, faults, _) throws in
            faults.failFlushes(errno: EIO)
            #expect(try backlog.enqueue(payload(for: 1, size: 10)) == .stored(sequence: 1))
            #expect(backlog.isSpoolDegraded)
            #expect(spool.lastSequence == 1)
            #expect(try backlog.enqueue(payload(for: 2, size: 10)) == .stored(sequence: 2))
            #expect(backlog.memoryOnlyCount == 1)
            faults.heal()
            #expect(backlog.resumeSpool())
            #expect(spool.lastSequence == 2)
            #expect(try backlog.pending(limit: 10) == records([1, 2]))
        }
    }

    @Test("an acknowledgement whose record cannot be written still counts, and degrades the spool")
    func acknowledgementWriteFailure() throws {
        try withDegradableBacklog { (backlog, spool, faults, directory) throws in
            for sequence in 1...3 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 10)) }
            faults.failWrites()
            #expect(try backlog.acknowledge(1))
            #expect(try !backlog.acknowledge(1))
            #expect(backlog.isSpoolDegraded)
            #expect(backlog.count == 2)
            #expect(try recoveredAfterCrash(of: directory) == records([1, 2, 3]))
            faults.heal()
            #expect(backlog.resumeSpool())
            #expect(spool.deliveredWatermark == 1)
            #expect(try recoveredAfterCrash(of: directory) == records([2, 3]))
        }
    }

    @Test("a backlog without a spool is never degraded")
    func memoryBacklogNeverDegraded() throws {
        let backlog = DeliveryBacklog(limits: .init(maxMessages: 10, maxBytes: 100), overflow: .dropOldest)
        backlog.spoolFailed(SpoolError.closed(path: "/nowhere"))
        #expect(!backlog.isSpoolDegraded)
        #expect(backlog.resumeSpool())
        _ = try backlog.enqueue([1, 2, 3])
        #expect(backlog.memoryOnlyCount == 1)
    }

    @Test("a fully delivered spool gives its space back before the tail moves in")
    func restartEmptyWhenDelivered() throws {
        try withDegradableBacklog { (backlog, spool, faults, directory) throws in
            for sequence in 1...20 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 100)) }
            faults.failWrites()
            for sequence in 21...25 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 100)) }
            for sequence in 1...22 as ClosedRange<UInt64> { #expect(try backlog.acknowledge(sequence)) }
            #expect(try segmentBytesOnDisk(directory) > 2_000)
            faults.heal()
            #expect(backlog.resumeSpool())
            // The delivered segment is gone; the new one starts after the tail's acknowledged head
            // (21, 22: skipped, not written) and holds the rest of the tail.
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") } == ["00000000000000000023.seg"])
            #expect(try segmentBytesOnDisk(directory) < 600)
            #expect(spool.deliveredWatermark == 22)
            #expect(try backlog.pending(limit: 10).map(\.sequence) == [23, 24, 25])
            #expect(
                try recoveredAfterCrash(of: directory)
                    == (23...25 as ClosedRange<UInt64>).map {
                        SpoolRecord(sequence: $0, payload: payload(for: $0, size: 100))
                    })
            // Nothing pending and already empty: nothing to do.
            for sequence in 23...25 as ClosedRange<UInt64> { #expect(try backlog.acknowledge(sequence)) }
            #expect(try spool.restartEmptyIfDelivered())
            #expect(try !spool.restartEmptyIfDelivered())
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") } == ["00000000000000000026.seg"])
            #expect(try recoveredAfterCrash(of: directory).isEmpty)
            #expect(try backlog.enqueue(payload(for: 26, size: 10)) == .stored(sequence: 26))
        }
    }

    @Test("compaction gives space back while the disk refuses the acknowledgement record")
    func compactionWhileDegraded() throws {
        try withDegradableBacklog(segmentBytes: 200) { (backlog, spool, faults, directory) throws in
            for sequence in 1...10 as ClosedRange<UInt64> { _ = try backlog.enqueue(payload(for: sequence, size: 50)) }
            let segmentsBefore = try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count
            #expect(segmentsBefore >= 4)
            faults.failWrites()
            for sequence in 1...6 as ClosedRange<UInt64> { #expect(try backlog.acknowledge(sequence)) }
            #expect(backlog.isSpoolDegraded)
            #expect(spool.deliveredWatermark == 6)
            let segmentsAfter = try fileNames(in: directory).filter { $0.hasSuffix(".seg") }
            #expect(segmentsAfter.count < segmentsBefore)
            #expect(try recoveredAfterCrash(of: directory).map(\.sequence) == Array(7...10))
        }
    }

    @Test("with the disk failing and healing at random, the backlog decides like one in memory", .timeLimit(.minutes(1)))
    func degradedAgreesWithMemory() async throws {
        await propertyCheck(count: 40, input: Gen.int(in: 0...999).array(of: 1...300), Gen.bool) { operations, dropOldest in
            do {
                try withTemporaryDirectory { directory in
                    let limits = BufferLimits(maxMessages: 8, maxBytes: 300)
                    let policy: BufferOverflowPolicy = dropOldest ? .dropOldest : .dropNewest
                    let faults = SpoolWriteFaults()
                    var configuration = testConfiguration(segmentBytes: 256)
                    configuration.writeFaults = faults
                    var stored: [UInt64: [UInt8]] = [:]
                    do {
                        let spool = try Spool(directory: directory, configuration: configuration)
                        let persistent = DeliveryBacklog(limits: limits, overflow: policy, spool: spool)
                        let inMemory = DeliveryBacklog(limits: limits, overflow: policy)
                        for operation in operations {
                            switch operation % 11 {
                            case 0: faults.failWrites(errno: ENOSPC, bytesBeforeFailure: operation % 40)
                            case 1: faults.heal()
                            case 2: persistent.resumeSpool()
                            case 3, 4, 5:
                                let oldest = try inMemory.pending(limit: 1).first?.sequence ?? 0
                                let sequence = oldest + UInt64(operation % 4)
                                #expect(try persistent.acknowledge(sequence) == inMemory.acknowledge(sequence))
                            default:
                                let data = payload(for: UInt64(operation), size: 1 + operation % 70)
                                let admission = try persistent.enqueue(data)
                                #expect(try admission == inMemory.enqueue(data))
                                switch admission {
                                case .stored(let sequence), .storedDroppingOldest(let sequence, _): stored[sequence] = data
                                default: break
                                }
                            }
                            #expect(persistent.count == inMemory.count)
                            #expect(persistent.byteCount == inMemory.byteCount)
                            #expect(persistent.memoryOnlyCount <= persistent.count)
                            #expect(try persistent.pending(limit: 100) == inMemory.pending(limit: 100))
                        }
                        #expect(persistent.counters == inMemory.counters)
                        faults.heal()
                        #expect(persistent.resumeSpool())
                        #expect(persistent.memoryOnlyCount == 0)
                        #expect(try persistent.pending(limit: 100) == inMemory.pending(limit: 100))
                        let pending = try inMemory.pending(limit: 100)
                        try spool.close()
                        // After a restart: everything pending, in order, with its payload; anything
                        // more is an acknowledged one coming again (at-least-once), never a placeholder.
                        let reopened = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 256))
                        defer { try? reopened.close() }
                        #expect(reopened.recovery.damage.isEmpty)
                        let recovered = try DeliveryBacklog(limits: limits, overflow: policy, spool: reopened).pending(limit: 1_000)
                        #expect(Set(pending.map(\.sequence)).isSubset(of: Set(recovered.map(\.sequence))))
                        #expect(recovered.map(\.sequence) == recovered.map(\.sequence).sorted())
                        for record in recovered { #expect(stored[record.sequence] == record.payload) }
                    }
                }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }
}
