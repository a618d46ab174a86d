/// The pure reader of a dead-letter log file: `SpoolRecordFormat` data records (CRC-32C, consecutive
/// sequences from 1) whose payloads are ``DeadLetterRecord``s. Unlike a spool segment, damage in
/// the middle does not end the log: the scanner skips to the next valid record and counts what it
/// skipped, so one bad sector costs the letters it held, not the ones after it.
enum DeadLetterLog {
    /// A payload larger than this is damage, not a letter.
    static let maxPayloadBytes = 16 << 20

    /// One decoded record and where its frame lies in the file.
    struct Entry: Equatable {
        var record: DeadLetterRecord
        var offset: Int
        var length: Int
        var sequence: UInt64
    }

    struct Scan: Equatable {
        var entries: [Entry] = []
        /// Bytes up to the end of the last valid record: a torn tail after it is cut off.
        var validLength = 0
        /// A record cut short at the end of the file (a write interrupted by a crash).
        var tornTail = false
        /// Damaged regions and undecodable records skipped in the middle of the file.
        var skipped = 0
        /// The sequence the next appended record carries.
        var nextSequence: UInt64 = 1
    }

    /// Scans the whole file. Never traps on any input.
    static func scan(_ bytes: [UInt8]) -> Scan {
        var result = Scan()
        var offset = 0
        var expected: UInt64 = 1
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                let scan = SpoolRecordFormat.scan(rest, firstSequence: expected, maxPayloadBytes: maxPayloadBytes)
                for found in scan.records {
                    let start = offset + found.payloadOffset
                    let payload = Array(raw[start..<(start + found.payloadLength)])
                    if let record = DeadLetterRecord.decode(payload) {
                        result.entries.append(
                            Entry(
                                record: record, offset: start - SpoolRecordFormat.headerSize,
                                length: SpoolRecordFormat.headerSize + found.payloadLength, sequence: found.sequence))
                    } else {
                        result.skipped += 1
                    }
                }
                expected = scan.nextSequence
                guard let stop = scan.stop else {
                    result.validLength = raw.count
                    offset = raw.count
                    break
                }
                let stopOffset = offset + stop.offset
                result.validLength = stopOffset
                if stop.reachesEnd {
                    result.tornTail = true
                    break
                }
                result.skipped += 1
                guard let next = nextRecord(in: raw, after: stopOffset) else {
                    // Nothing valid follows: the rest is one damaged region, cut off like a torn tail.
                    break
                }
                offset = next.offset
                expected = next.sequence
            }
        }
        result.nextSequence = expected
        return result
    }

    /// The first offset after `start` where one whole valid record begins, and its sequence.
    private static func nextRecord(in raw: UnsafeRawBufferPointer, after start: Int) -> (offset: Int, sequence: UInt64)? {
        var candidate = start + 1
        let header = SpoolRecordFormat.headerSize
        while candidate + header <= raw.count {
            if raw[candidate] == 0x53, raw[candidate + 1] == 0x50 {
                let sequence = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: candidate + 8, as: UInt64.self))
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: candidate + 4, as: UInt32.self)))
                let end = candidate + header + length
                guard length <= maxPayloadBytes, end <= raw.count else {
                    candidate += 1
                    continue
                }
                // Only the one record: a scan to the end of the file at every candidate would be quadratic.
                let rest = UnsafeRawBufferPointer(rebasing: raw[candidate..<end])
                let scan = SpoolRecordFormat.scan(rest, firstSequence: sequence, maxPayloadBytes: maxPayloadBytes)
                if !scan.records.isEmpty { return (candidate, sequence) }
            }
            candidate += 1
        }
        return nil
    }
}
