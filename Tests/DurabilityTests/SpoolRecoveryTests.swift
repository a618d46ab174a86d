import Foundation
import Testing

@testable import Durability

/// Crash safety (docs/contract.md §5.6): whatever state a crash or a disk leaves behind, opening the spool
/// recovers the valid records, reports the damage, and never traps.
@Suite("Spool: recovery from torn and corrupt records")
struct SpoolRecoveryTests {
    static let firstSegment = "00000000000000000001.seg"

    /// Writes `count` records into a fresh spool in `directory` and returns the segment's bytes
    /// and the offset where each record starts.
    func writeRecords(_ sizes: [Int], in directory: String, acknowledgeUpTo: UInt64? = nil) throws -> (
        bytes: [UInt8], starts: [Int]
    ) {
        var starts: [Int] = []
        do {
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            for (index, size) in sizes.enumerated() {
                starts.append(spool.diskBytes)
                try spool.append(payload(for: UInt64(index + 1), size: size))
            }
            if let acknowledgeUpTo { try spool.acknowledge(upTo: acknowledgeUpTo) }
            try spool.close()
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory + "/" + Self.firstSegment)))
        return (bytes, starts)
    }

    /// A fresh directory holding one segment file with exactly these bytes.
    func withSegment<T>(_ bytes: [UInt8], name: String = SpoolRecoveryTests.firstSegment, _ body: (String) throws -> T)
        throws -> T
    {
        try withTemporaryDirectory { directory in
            try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + name))
            return try body(directory)
        }
    }

    @Test("the last record cut at every byte offset: earlier records intact, torn tail reported, appends continue")
    func truncateLastRecordAtEveryOffset() throws {
        let sizes = [5, 0, 33, 57]
        let (bytes, starts) = try withTemporaryDirectory { try writeRecords(sizes, in: $0) }
        let lastStart = starts[3]
        #expect(bytes.count == lastStart + SpoolRecordFormat.headerSize + 57)
        let earlier = (1...3).map {
            SpoolRecord(sequence: UInt64($0), payload: payload(for: UInt64($0), size: sizes[$0 - 1]))
        }

        for cut in lastStart..<bytes.count {
            try withSegment(Array(bytes[0..<cut])) { directory in
                do {
                    let spool = try Spool(directory: directory, configuration: testConfiguration())
                    #expect(try allPending(spool) == earlier, "cut at \(cut)")
                    if cut == lastStart {
                        #expect(spool.recovery.damage.isEmpty, "a record cut before its first byte is simply absent")
                    } else {
                        let damage = try #require(spool.recovery.damage.first, "cut at \(cut)")
                        #expect(spool.recovery.damage.count == 1)
                        #expect(damage.offset == lastStart)
                        #expect(damage.repair == .truncatedTornTail(discardedBytes: cut - lastStart))
                        let headerCut = cut - lastStart < SpoolRecordFormat.headerSize
                        if headerCut {
                            #expect(damage.reason == .truncatedHeader(available: cut - lastStart))
                        } else {
                            #expect(damage.reason == .truncatedPayload(expected: 57, available: cut - lastStart - 20))
                        }
                    }
                    #expect(try fileSize(directory + "/" + Self.firstSegment) == lastStart, "torn bytes truncated away")
                    #expect(try spool.append([0xAB, 0xCD]) == 4, "the next append reuses the lost sequence")
                    try spool.close()
                }
                let reopened = try Spool(directory: directory, configuration: testConfiguration())
                #expect(reopened.recovery.damage.isEmpty, "after repair the log is clean (cut at \(cut))")
                #expect(try allPending(reopened) == earlier + [SpoolRecord(sequence: 4, payload: [0xAB, 0xCD])])
            }
        }
    }

    @Test("the file cut at every offset yields exactly the records that fit before the cut")
    func truncateWholeFileAtEveryOffset() throws {
        let sizes = [3, 12, 0, 40, 7]
        let (bytes, starts) = try withTemporaryDirectory { try writeRecords(sizes, in: $0) }
        let ends = zip(starts, sizes).map { $0 + SpoolRecordFormat.headerSize + $1 }
        for cut in 0...bytes.count {
            try withSegment(Array(bytes[0..<cut])) { directory in
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                let expected = ends.filter { $0 <= cut }.count
                #expect(try allPending(spool).map(\.sequence) == (0..<expected).map { UInt64($0 + 1) }, "cut at \(cut)")
                #expect(spool.recovery.damage.count == (ends.contains(cut) || cut == 0 ? 0 : 1))
            }
        }
    }

    @Test("a cut inside the last acknowledgement record falls back to the previous watermark (redelivery, not loss)")
    func tornAcknowledgement() throws {
        let (bytes, _) = try withTemporaryDirectory { try writeRecords([4, 4, 4, 4], in: $0, acknowledgeUpTo: 2) }
        // The file ends with the 20-byte acknowledgement record of watermark 2.
        for cut in (bytes.count - SpoolRecordFormat.headerSize + 1)..<bytes.count {
            try withSegment(Array(bytes[0..<cut])) { directory in
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                #expect(spool.deliveredWatermark == 0)
                #expect(try allPending(spool).map(\.sequence) == [1, 2, 3, 4])
            }
        }
        try withSegment(bytes) { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            #expect(try allPending(spool).map(\.sequence) == [3, 4])
        }
    }

    @Test("a flipped byte anywhere in the last record's payload is detected by the checksum")
    func flippedPayloadByteInLastRecord() throws {
        let sizes = [10, 20, 30]
        let (bytes, starts) = try withTemporaryDirectory { try writeRecords(sizes, in: $0) }
        let payloadStart = starts[2] + SpoolRecordFormat.headerSize
        for position in payloadStart..<bytes.count {
            var damaged = bytes
            damaged[position] ^= 0x01
            try withSegment(damaged) { directory in
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                #expect(try allPending(spool).map(\.sequence) == [1, 2], "flip at \(position)")
                #expect(
                    spool.recovery.damage
                        == [
                            SpoolDamage(
                                file: directory + "/" + Self.firstSegment,
                                offset: starts[2],
                                reason: .checksumMismatch,
                                repair: .truncatedTornTail(discardedBytes: 50)
                            )
                        ]
                )
            }
        }
    }

    @Test("a flipped byte anywhere in the last record's header is detected; earlier records survive")
    func flippedHeaderByteInLastRecord() throws {
        let sizes = [10, 20, 30]
        let (bytes, starts) = try withTemporaryDirectory { try writeRecords(sizes, in: $0) }
        for position in starts[2]..<(starts[2] + SpoolRecordFormat.headerSize) {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[position] ^= UInt8(1 << bit)
                try withSegment(damaged) { directory in
                    let spool = try Spool(directory: directory, configuration: testConfiguration())
                    #expect(try allPending(spool).map(\.sequence) == [1, 2], "flip at \(position) bit \(bit)")
                    #expect(spool.recovery.damage.count == 1)
                    #expect(spool.recovery.damage.first?.offset == starts[2])
                    #expect(try spool.append([9]) == 3)
                }
            }
        }
    }

    @Test("corruption in the middle: the valid prefix is kept, the damaged file is moved aside intact")
    func corruptionInTheMiddle() throws {
        let sizes = [10, 20, 30, 40]
        let (bytes, starts) = try withTemporaryDirectory { try writeRecords(sizes, in: $0) }
        var damaged = bytes
        damaged[starts[1] + SpoolRecordFormat.headerSize + 5] ^= 0xFF
        try withSegment(damaged) { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                #expect(try allPending(spool).map(\.sequence) == [1])
                let damage = try #require(spool.recovery.damage.first)
                #expect(damage.reason == .checksumMismatch)
                #expect(damage.offset == starts[1])
                let aside = directory + "/" + Self.firstSegment + ".corrupt"
                #expect(damage.repair == .movedAside([aside]))
                #expect(
                    try [UInt8](Data(contentsOf: URL(fileURLWithPath: aside))) == damaged,
                    "kept whole for inspection"
                )
                #expect(try spool.append([7]) == 2)
                try spool.close()
            }
            let reopened = try Spool(directory: directory, configuration: testConfiguration())
            #expect(reopened.recovery.damage.isEmpty)
            #expect(
                try allPending(reopened) == [
                    SpoolRecord(sequence: 1, payload: payload(for: 1, size: 10)),
                    SpoolRecord(sequence: 2, payload: [7]),
                ]
            )
        }
    }

    @Test("corruption in an older segment moves it and every later segment aside")
    func corruptionInOlderSegment() throws {
        try withTemporaryDirectory { directory in
            let configuration = testConfiguration(segmentBytes: 100)
            do {
                let spool = try Spool(directory: directory, configuration: configuration)
                // 20 + 30 = 50 bytes per record: two per segment.
                for sequence in 1...6 as ClosedRange<UInt64> { try spool.append(payload(for: sequence, size: 30)) }
                try spool.close()
            }
            #expect(
                try fileNames(in: directory) == [
                    "00000000000000000001.seg", "00000000000000000003.seg", "00000000000000000005.seg", "lock",
                ]
            )
            let middle = directory + "/00000000000000000003.seg"
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: middle)))
            bytes[50 + 25] ^= 0x10  // record 4's payload
            try Data(bytes).write(to: URL(fileURLWithPath: middle))

            let spool = try Spool(directory: directory, configuration: configuration)
            #expect(try allPending(spool).map(\.sequence) == [1, 2, 3])
            #expect(spool.recovery.damage.count == 1)
            #expect(
                spool.recovery.damage.first?.repair
                    == .movedAside([middle + ".corrupt", directory + "/00000000000000000005.seg.corrupt"])
            )
            #expect(try spool.append([1]) == 4)
        }
    }

    @Test("a missing segment is a gap: later segments are moved aside, never spliced out of order")
    func missingSegment() throws {
        try withTemporaryDirectory { directory in
            let configuration = testConfiguration(segmentBytes: 100)
            do {
                let spool = try Spool(directory: directory, configuration: configuration)
                for sequence in 1...6 as ClosedRange<UInt64> { try spool.append(payload(for: sequence, size: 30)) }
                try spool.close()
            }
            try FileManager.default.removeItem(atPath: directory + "/00000000000000000003.seg")
            let spool = try Spool(directory: directory, configuration: configuration)
            #expect(try allPending(spool).map(\.sequence) == [1, 2])
            #expect(spool.recovery.damage.first?.reason == .segmentGap(expected: 3, found: 5))
            #expect(try spool.append([1]) == 3)
        }
    }

    @Test("zeros after the last record (power loss after the file grew) are a torn tail")
    func zeroFilledTail() throws {
        let (bytes, _) = try withTemporaryDirectory { try writeRecords([8, 8], in: $0) }
        try withSegment(bytes + [UInt8](repeating: 0, count: 4096)) { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            #expect(try allPending(spool).map(\.sequence) == [1, 2])
            #expect(spool.recovery.damage.first?.reason == .zeroFilled(bytes: 4096))
            #expect(spool.recovery.damage.first?.repair == .truncatedTornTail(discardedBytes: 4096))
        }
    }

    @Test("files that are not segments are ignored; a garbage segment never crashes recovery")
    func garbage() throws {
        var generator = SystemRandomNumberGenerator()
        for length in [1, 19, 20, 21, 100, 5000] {
            let garbage = (0..<length).map { _ in UInt8.random(in: 1...255, using: &generator) }
            try withSegment(garbage) { directory in
                try Data("not a segment".utf8).write(to: URL(fileURLWithPath: directory + "/notes.txt"))
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                #expect(try allPending(spool).isEmpty)
                #expect(spool.recovery.damage.count == 1)
                #expect(try spool.append([1]) == 1)
            }
        }
    }
}

@Suite("Spool: torn last record in a later segment")
struct SpoolRotatedRecoveryTests {
    @Test("the last record of the newest segment cut at every byte offset; older segments untouched")
    func truncateLastRecordOfNewestSegment() throws {
        let configuration = testConfiguration(segmentBytes: 100)
        // 20 + 30 bytes per record, two per segment: [1,2] [3,4] [5]; record 5 is cut.
        let (files, lastStart) = try withTemporaryDirectory { directory -> ([String: [UInt8]], Int) in
            let spool = try Spool(directory: directory, configuration: configuration)
            for sequence in 1...4 as ClosedRange<UInt64> { try spool.append(payload(for: sequence, size: 30)) }
            try spool.acknowledge(upTo: 1)  // an acknowledgement record inside segment 3
            try spool.append(payload(for: 5, size: 30))
            try spool.close()
            var files: [String: [UInt8]] = [:]
            for name in try fileNames(in: directory) where name.hasSuffix(".seg") {
                files[name] = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
            }
            return (files, 0)
        }
        #expect(
            files.keys.sorted() == ["00000000000000000001.seg", "00000000000000000003.seg", "00000000000000000005.seg"]
        )
        let newest = try #require(files["00000000000000000005.seg"])
        #expect(newest.count == 50)
        for cut in lastStart..<newest.count {
            try withTemporaryDirectory { directory in
                for (name, bytes) in files {
                    let content = name == "00000000000000000005.seg" ? Array(bytes[0..<cut]) : bytes
                    try Data(content).write(to: URL(fileURLWithPath: directory + "/" + name))
                }
                do {
                    let spool = try Spool(directory: directory, configuration: configuration)
                    #expect(try allPending(spool).map(\.sequence) == [2, 3, 4], "cut at \(cut)")
                    #expect(spool.recovery.damage.count == (cut == 0 ? 0 : 1))
                    #expect(try spool.append([5, 5]) == 5)
                    try spool.close()
                }
                let reopened = try Spool(directory: directory, configuration: configuration)
                #expect(reopened.recovery.damage.isEmpty)
                #expect(try allPending(reopened).map(\.sequence) == [2, 3, 4, 5])
                #expect(try reopened.read(after: 4, limit: 1).first?.payload == [5, 5])
            }
        }
    }
}
