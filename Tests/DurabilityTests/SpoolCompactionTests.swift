import Foundation
import Testing

@testable import Durability

@Suite("Spool: compaction keeps disk use bounded by what is pending")
struct SpoolCompactionTests {
    @Test("draining a large backlog deletes delivered segments as it goes")
    func drainLargeBacklog() throws {
        try withTemporaryDirectory { directory in
            let segmentBytes = 8 << 10
            let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: segmentBytes))
            let records = 20_000
            for sequence in 1...UInt64(records) { try spool.append(payload(for: sequence, size: 100)) }
            let fullBacklog = try segmentBytesOnDisk(directory)
            #expect(fullBacklog == records * 120)
            #expect(spool.diskBytes == fullBacklog)

            var delivered: UInt64 = 0
            var maxOverhead = 0
            while true {
                let batch = try spool.read(limit: 250)
                if batch.isEmpty { break }
                for record in batch {
                    #expect(record.sequence == delivered + 1)
                    delivered = record.sequence
                }
                try spool.acknowledge(upTo: delivered)
                let onDisk = try segmentBytesOnDisk(directory)
                #expect(onDisk == spool.diskBytes, "the counter matches the files")
                // Pending records need 120 bytes each; the rest is the partly delivered oldest
                // segment and acknowledgement records in the active one.
                let overhead = onDisk - spool.pendingCount * 120
                maxOverhead = max(maxOverhead, overhead)
                #expect(overhead <= 2 * segmentBytes, "disk \(onDisk) for \(spool.pendingCount) pending")
            }
            #expect(delivered == UInt64(records))
            #expect(spool.pendingCount == 0)
            #expect(try segmentBytesOnDisk(directory) <= segmentBytes + 20 * 100)
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count == 1)
            #expect(maxOverhead > 0)
        }
    }

    @Test("steady append-then-acknowledge traffic keeps the spool at a bounded size")
    func steadyState() throws {
        try withTemporaryDirectory { directory in
            let segmentBytes = 4 << 10
            let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: segmentBytes))
            for sequence in 1...UInt64(10_000) {
                try spool.append(payload(for: sequence, size: 50))
                try spool.acknowledge(sequence)
                if sequence % 500 == 0 {
                    #expect(try segmentBytesOnDisk(directory) <= 2 * segmentBytes + 90)
                }
            }
            try spool.close()
            let reopened = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: segmentBytes))
            #expect(reopened.pendingCount == 0)
            #expect(reopened.deliveredWatermark == 10_000)
            #expect(try reopened.append([1]) == 10_001, "sequences are never reused, even after full compaction")
        }
    }

    @Test("out-of-order acknowledgements hold a segment until its gap is filled")
    func segmentHeldByGap() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 100))
            for sequence in 1...6 as ClosedRange<UInt64> { try spool.append(payload(for: sequence, size: 30)) }
            // Segments: [1,2] [3,4] [5,6]
            for sequence in [2, 3, 4] as [UInt64] { try spool.acknowledge(sequence) }
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count == 3)
            try spool.acknowledge(1)
            #expect(spool.deliveredWatermark == 4)
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") } == ["00000000000000000005.seg"])
        }
    }
}
