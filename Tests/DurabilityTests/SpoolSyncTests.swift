import Foundation
import Testing

@testable import Durability

/// A sync in three steps — point taken under the owner's lock, flushed without it, recorded —
/// so that appends never wait for the disk.
@Suite("Spool: sync points taken, flushed apart from the appends, recorded")
struct SpoolSyncTests {
    func configuration(segmentBytes: Int = 1 << 20) -> SpoolConfiguration {
        SpoolConfiguration(fsync: .onSync, segmentBytes: segmentBytes, maxPayloadBytes: 1 << 20, acknowledgementBatch: 256)
    }

    @Test("appends go on while a point is being flushed; they belong to the next point")
    func appendsDuringFlush() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: configuration())
            for sequence in 1...UInt64(3) { try spool.append(payload(for: sequence)) }
            let point = try spool.prepareSync()
            #expect(point.lastSequence == 3)
            #expect(!point.isEmpty)
            // The flush runs elsewhere; the owner appends meanwhile.
            for sequence in 4...UInt64(5) { try spool.append(payload(for: sequence)) }
            try point.flush()
            spool.finishSync(point, flushed: true)
            #expect(spool.syncedSequence == 3)
            let next = try spool.prepareSync()
            #expect(next.lastSequence == 5)
            #expect(!next.isEmpty)
            try next.flush()
            spool.finishSync(next, flushed: true)
            #expect(spool.syncedSequence == 5)
            #expect(try allPending(spool).map(\.sequence) == [1, 2, 3, 4, 5])
            try spool.close()
        }
    }

    @Test("the point flushed on the sync thread is recorded like one flushed in place")
    func flushOnSyncThread() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-test-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let spool = try Spool(directory: directory, configuration: configuration())
        try spool.append([1, 2, 3])
        let point = try spool.prepareSync()
        try await point.flushOnSyncThread()
        spool.finishSync(point, flushed: true)
        #expect(spool.syncedSequence == 1)
        try spool.close()
    }

    @Test("with nothing written since the last sync the point is empty, and so is close's flush")
    func emptyPointAfterSync() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: configuration())
            try spool.append([1])
            try spool.sync()
            #expect(spool.syncedSequence == 1)
            let point = try spool.prepareSync()
            #expect(point.isEmpty)
            spool.finishSync(point, flushed: true)
            try spool.close()
        }
    }

    @Test("a failed flush keeps its files for the next sync")
    func failedFlushIsRetried() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: configuration())
            try spool.append([1])
            let failed = try spool.prepareSync()
            spool.finishSync(failed, flushed: false)
            #expect(spool.syncedSequence == 0)
            try spool.append([2])
            let retry = try spool.prepareSync()
            #expect(retry.files.count == 1)
            #expect(retry.files.first === failed.files.first)
            try retry.flush()
            spool.finishSync(retry, flushed: true)
            #expect(spool.syncedSequence == 2)
            try spool.close()
        }
    }

    @Test("taking a point writes the pending acknowledgement record: a crash after it keeps the watermark")
    func pointCarriesWatermark() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: configuration())
                for sequence in 1...UInt64(4) { try spool.append(payload(for: sequence)) }
                try spool.acknowledge(upTo: 2)
                let point = try spool.prepareSync()
                #expect(point.watermark == 2)
                try point.flush()
                spool.finishSync(point, flushed: true)
                #expect(spool.syncedWatermark == 2)
                // Dropped without close: a crash.
            }
            let reopened = try Spool(directory: directory, configuration: configuration())
            #expect(reopened.deliveredWatermark == 2)
            #expect(try allPending(reopened).map(\.sequence) == [3, 4])
            try reopened.close()
        }
    }

    @Test("with onSync, rotation leaves the old segment and the directory to the next sync")
    func rotationDefersFlush() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: configuration(segmentBytes: 256))
            for sequence in 1...UInt64(5) { try spool.append(payload(for: sequence, size: 100)) }
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count == 3)
            let point = try spool.prepareSync()
            #expect(point.files.count == 3)
            #expect(point.directory == directory)
            try point.flush()
            spool.finishSync(point, flushed: true)
            #expect(try spool.prepareSync().isEmpty)
            try spool.close()
        }
    }

    @Test("a recovered spool's first sync flushes what the crashed process left in the page cache")
    func recoveredFilesAreFlushed() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: configuration())
                try spool.append([1, 2, 3])
            }
            let reopened = try Spool(directory: directory, configuration: configuration())
            let point = try reopened.prepareSync()
            #expect(point.files.count == 1)
            #expect(point.lastSequence == 1)
            try reopened.close()
        }
    }
}
