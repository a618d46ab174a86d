import Foundation
import PropertyBased
import Testing

@testable import Durability

/// Random interleavings of append / acknowledge / acknowledge(upTo:) / crash-and-reopen /
/// close-and-reopen, checked after every step against an in-memory reference model of the
/// documented semantics.
@Suite("Spool: random operation sequences against a reference model")
struct SpoolModelTests {
    /// The documented semantics, in memory.
    struct Model {
        var records: [UInt64: [UInt8]] = [:]
        var lastSequence: UInt64 = 0
        var watermark: UInt64 = 0
        var acknowledgedAbove: Set<UInt64> = []

        var pending: [SpoolRecord] {
            ((watermark + 1)...max(watermark + 1, lastSequence)).compactMap { sequence in
                guard sequence <= lastSequence, !acknowledgedAbove.contains(sequence), let payload = records[sequence]
                else {
                    return nil
                }
                return SpoolRecord(sequence: sequence, payload: payload)
            }
        }

        mutating func append(_ payload: [UInt8]) -> UInt64 {
            lastSequence += 1
            records[lastSequence] = payload
            return lastSequence
        }

        mutating func acknowledge(_ sequence: UInt64) -> Bool {
            guard sequence > watermark, sequence <= lastSequence, !acknowledgedAbove.contains(sequence) else {
                return false
            }
            acknowledgedAbove.insert(sequence)
            while acknowledgedAbove.remove(watermark + 1) != nil { watermark += 1 }
            return true
        }

        mutating func acknowledge(upTo sequence: UInt64) -> Int {
            let target = min(sequence, lastSequence)
            guard target > watermark else { return 0 }
            let newly = ((watermark + 1)...target).filter { !acknowledgedAbove.contains($0) }.count
            acknowledgedAbove = acknowledgedAbove.filter { $0 > target }
            watermark = target
            while acknowledgedAbove.remove(watermark + 1) != nil { watermark += 1 }
            return newly
        }

        /// After a restart only the watermark survives: out-of-order acknowledgements are
        /// forgotten and those records come back (at-least-once).
        mutating func restart() {
            acknowledgedAbove = []
        }
    }

    @Test("spool behaves like the model for random operation sequences", .timeLimit(.minutes(2)))
    func randomOperations() async throws {
        await propertyCheck(count: 60, input: Gen.int(in: 0...9_999).array(of: 1...250)) { operations in
            do {
                try withTemporaryDirectory { directory in
                    // Tiny segments, so rotation and compaction happen constantly.
                    let configuration = testConfiguration(segmentBytes: 160)
                    var spool: Spool? = try Spool(directory: directory, configuration: configuration)
                    var model = Model()
                    for operation in operations {
                        let argument = operation / 10
                        if operation % 10 == 7 {
                            // Crash: drop the only reference without close (deinit closes the
                            // descriptors, like process exit; nothing is flushed or finished).
                            spool = nil
                            spool = try Spool(directory: directory, configuration: configuration)
                            model.restart()
                            #expect(spool?.recovery.damage == [])
                        }
                        let current = try #require(spool)
                        switch operation % 10 {
                        case 0...3:
                            let data = payload(for: UInt64(argument), size: argument % 90)
                            let expected = model.append(data)
                            #expect(try current.append(data) == expected)
                        case 4, 5:
                            // Mostly pending sequences, sometimes stale or future ones.
                            let sequence = model.watermark &+ UInt64(argument % 8)
                            let expected = model.acknowledge(sequence)
                            #expect(try current.acknowledge(sequence) == expected)
                        case 6:
                            let sequence = model.watermark &+ UInt64(argument % 6)
                            let expected = model.acknowledge(upTo: sequence)
                            #expect(try current.acknowledge(upTo: sequence) == expected)
                        case 7:
                            break  // handled above
                        case 8:
                            try current.close()
                            spool = try Spool(directory: directory, configuration: configuration)
                            model.restart()
                        default:
                            let after = model.watermark &+ UInt64(argument % 5)
                            #expect(
                                try current.read(after: after, limit: 3)
                                    == Array(model.pending.filter { $0.sequence > after }.prefix(3))
                            )
                        }
                        let checked = try #require(spool)
                        #expect(checked.deliveredWatermark == model.watermark)
                        #expect(checked.lastSequence == model.lastSequence)
                        #expect(checked.pendingCount == model.pending.count)
                        #expect(checked.pendingBytes == model.pending.reduce(0) { $0 + $1.payload.count })
                    }
                    let final = try #require(spool)
                    #expect(try allPending(final) == model.pending)
                    #expect(try segmentBytesOnDisk(directory) == final.diskBytes)
                }
            } catch {
                Issue.record("unexpected error: \(error)")
            }
        }
    }

    @Test("scanning any mutation of a valid segment yields a prefix of its records", .timeLimit(.minutes(1)))
    func scannerNeverInventsRecords() async throws {
        let original: [UInt8] = (1...8).flatMap { sequence in
            SpoolRecordFormat.encode(kind: .data, sequence: UInt64(sequence), payload: payload(for: UInt64(sequence)))
        }
        let reference = SpoolRecordFormat.scan(original, firstSequence: 1, maxPayloadBytes: 1 << 20)
        #expect(reference.records.count == 8)
        #expect(reference.stop == nil)
        await propertyCheck(
            count: 300,
            input: Gen.int(in: 0...(original.count - 1)).array(of: 1...4),
            Gen.int(in: 1...255),
            Gen.int(in: 0...original.count)
        ) { positions, mask, cut in
            var bytes = Array(original[0..<cut])
            for position in positions where position < bytes.count { bytes[position] ^= UInt8(mask) }
            let scan = SpoolRecordFormat.scan(bytes, firstSequence: 1, maxPayloadBytes: 1 << 20)
            #expect(Array(reference.records.prefix(scan.records.count)) == scan.records)
            #expect(scan.validLength <= bytes.count)
            if scan.stop == nil { #expect(scan.validLength == bytes.count) }
        }
    }
}
