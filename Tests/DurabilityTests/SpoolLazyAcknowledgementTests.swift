import BridgeVocabulary
import Foundation
import Testing

@testable import Durability

/// The watermark is written lazily (with the next append, on sync/rotation/close, or after
/// `acknowledgementBatch` acknowledgements), and payloads are served from memory while the cache
/// has room. A spool dropped without `close()` stands for a crashed process: its file descriptors
/// are closed by `deinit`, nothing more is written.
@Suite("Spool: lazy acknowledgement records and the payload cache")
struct SpoolLazyAcknowledgementTests {
    func configuration(batch: Int = 256, cache: Int = 4 << 20, segmentBytes: Int = 1 << 20) -> SpoolConfiguration {
        SpoolConfiguration(
            fsync: .never, segmentBytes: segmentBytes, maxPayloadBytes: 1 << 20, memoryCacheBytes: cache, acknowledgementBatch: batch)
    }

    @Test("a crash before the watermark was written redelivers (at-least-once), never loses")
    func crashBeforeWatermarkWritten() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: configuration())
                for sequence in 1...10 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                #expect(try spool.acknowledge(upTo: 3) == 3)
                #expect(try spool.read(limit: 100).map(\.sequence) == Array(4...10))
            }  // dropped without close: "crash"
            let reopened = try Spool(directory: directory, configuration: configuration())
            #expect(reopened.recovery.deliveredWatermark == 0)
            #expect(try allPending(reopened).map(\.sequence) == Array(1...10))
        }
    }

    @Test("the next append carries the pending watermark in the same write")
    func appendCarriesWatermark() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: configuration())
                for sequence in 1...10 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                #expect(try spool.acknowledge(upTo: 3) == 3)
                try spool.append([7])
            }
            let reopened = try Spool(directory: directory, configuration: configuration())
            #expect(reopened.recovery.deliveredWatermark == 3)
            #expect(reopened.recovery.damage.isEmpty)
            #expect(try allPending(reopened).map(\.sequence) == Array(4...11))
        }
    }

    @Test("after acknowledgementBatch acknowledgements the watermark is written on its own; sync writes it too")
    func batchAndSyncWriteWatermark() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: configuration(batch: 2))
                for sequence in 1...10 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                try spool.acknowledge(1)
                try spool.acknowledge(2)  // second acknowledgement: written
                try spool.acknowledge(3)  // pending, lost in the crash
            }
            var reopened: Spool? = try Spool(directory: directory, configuration: configuration(batch: 2))
            #expect(reopened?.recovery.deliveredWatermark == 2)
            try reopened?.acknowledge(3)
            try reopened?.sync()
            reopened = nil
            let again = try Spool(directory: directory, configuration: configuration(batch: 2))
            #expect(again.recovery.deliveredWatermark == 3)
            #expect(try allPending(again).map(\.sequence) == Array(4...10))
        }
    }

    @Test("payloads past the memory cache are read back from disk, byte for byte, mixed with cached ones")
    func cacheLimit() throws {
        try withTemporaryDirectory { directory in
            // Room for a few records only: later ones are served by pread.
            let spool = try Spool(directory: directory, configuration: configuration(cache: 300, segmentBytes: 2_000))
            let sizes = [100, 100, 90, 250, 10, 700, 1, 0, 120]
            for (index, size) in sizes.enumerated() { try spool.append(payload(for: UInt64(index + 1), size: size)) }
            #expect(
                try allPending(spool)
                    == sizes.enumerated().map { SpoolRecord(sequence: UInt64($0 + 1), payload: payload(for: UInt64($0 + 1), size: $1)) })
            // Acknowledging frees cache room for new appends; reads stay exact across rotation.
            #expect(try spool.acknowledge(upTo: 6) == 6)
            for sequence in 10...20 as ClosedRange<UInt64> { try spool.append(payload(for: sequence, size: 150)) }
            let expected =
                (7...9).map { SpoolRecord(sequence: UInt64($0), payload: payload(for: UInt64($0), size: sizes[$0 - 1])) }
                + (10...20).map { SpoolRecord(sequence: UInt64($0), payload: payload(for: UInt64($0), size: 150)) }
            #expect(try allPending(spool) == expected)
            try spool.close()
            let reopened = try Spool(directory: directory, configuration: configuration(cache: 300, segmentBytes: 2_000))
            #expect(try allPending(reopened) == expected)
        }
    }
}

@Suite("Spool and DeliveryBacklog: bursts appended with one write")
struct SpoolBurstAppendTests {
    @Test("a burst gets consecutive sequences, reads back exactly, carries the pending watermark, survives reopening")
    func burst() throws {
        try withTemporaryDirectory { directory in
            let configuration = SpoolConfiguration(fsync: .never, segmentBytes: 600, maxPayloadBytes: 1 << 20, acknowledgementBatch: 256)
            do {
                let spool = try Spool(directory: directory, configuration: configuration)
                try spool.append(payload(for: 1, size: 10))
                try spool.acknowledge(1)
                // Fits in the segment: one write, watermark included.
                #expect(try spool.append(contentsOf: (2...5).map { payload(for: $0, size: 20) }) == [2, 3, 4, 5])
                // Does not fit: falls back to record-by-record appends across a rotation.
                #expect(try spool.append(contentsOf: (6...12).map { payload(for: $0, size: 90) }) == Array(6...12))
                #expect(try spool.append(contentsOf: []) == [])
                #expect(try allPending(spool).map(\.sequence) == Array(2...12))
            }  // "crash": no close
            let reopened = try Spool(directory: directory, configuration: configuration)
            #expect(reopened.recovery.deliveredWatermark == 1)
            #expect(reopened.recovery.damage.isEmpty)
            let expected =
                (2...5).map { SpoolRecord(sequence: $0, payload: payload(for: $0, size: 20)) }
                + (6...12).map { SpoolRecord(sequence: $0, payload: payload(for: $0, size: 90)) }
            #expect(try allPending(reopened) == expected)
        }
    }

    @Test("a burst into a full backlog follows the overflow policy message by message, like single enqueues")
    func burstIntoFullBacklog() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            let backlog = DeliveryBacklog(limits: BufferLimits(maxMessages: 3, maxBytes: 1 << 20), overflow: .dropOldest, spool: spool)
            let first = try backlog.enqueue(contentsOf: [[1], [2]])
            #expect(first == [.stored(sequence: 1), .stored(sequence: 2)])
            let second = try backlog.enqueue(contentsOf: [[3], [4], [5]])
            #expect(
                second == [
                    .stored(sequence: 3), .storedDroppingOldest(sequence: 4, dropped: [1]),
                    .storedDroppingOldest(sequence: 5, dropped: [2]),
                ])
            #expect(try backlog.pending(limit: 10).map(\.payload) == [[3], [4], [5]])
        }
    }
}
