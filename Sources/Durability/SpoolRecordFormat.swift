/// The on-disk record format of a spool segment, and the pure scanner that validates it.
///
/// A segment file is a plain concatenation of records. Each record is a 20-byte header
/// followed by its payload; all integers are little-endian:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0  | 2 | magic `0x5053` (bytes `S`, `P`) |
/// | 2  | 1 | kind: 1 = data, 2 = acknowledgement watermark |
/// | 3  | 1 | reserved, always 0 |
/// | 4  | 4 | payload length in bytes (0 for an acknowledgement) |
/// | 8  | 8 | sequence: a data record's own sequence number, or an acknowledgement's watermark |
/// | 16 | 4 | CRC-32C over header bytes 0..<16 followed by the payload |
///
/// Data sequences are consecutive across all segments (each segment file is named after the
/// first data sequence it holds or would hold), so a lost or reordered record is detectable,
/// not only a damaged one.
enum SpoolRecordFormat {
    /// Bytes in a record header.
    static let headerSize = 20
    /// The first two bytes of every record.
    static let magic: UInt16 = 0x5053

    /// What a record carries.
    enum Kind: UInt8 {
        /// An opaque payload, the unit the spool stores and delivers.
        case data = 1
        /// "Every data record up to this sequence is delivered": written when the delivered
        /// watermark advances, so recovery knows where delivery stopped.
        case acknowledgement = 2
    }

    /// Encodes a whole record (header and payload) in one buffer, so it goes to disk in one
    /// `write` call.
    static func encode(kind: Kind, sequence: UInt64, payload: [UInt8]) -> [UInt8] {
        var record = [UInt8]()
        record.reserveCapacity(headerSize + payload.count)
        appendLittleEndian(magic, to: &record)
        record.append(kind.rawValue)
        record.append(0)
        appendLittleEndian(UInt32(truncatingIfNeeded: payload.count), to: &record)
        appendLittleEndian(sequence, to: &record)
        let headerChecksum = CRC32C.checksum(record)
        let checksum = CRC32C.checksum(payload, continuing: headerChecksum)
        appendLittleEndian(checksum, to: &record)
        record.append(contentsOf: payload)
        return record
    }

    private static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        var little = value.littleEndian
        withUnsafeBytes(of: &little) { bytes.append(contentsOf: $0) }
    }

    /// One valid data record found by ``scan(_:firstSequence:maxPayloadBytes:)``.
    struct ScannedRecord: Equatable {
        /// The record's sequence number.
        var sequence: UInt64
        /// Where its payload starts in the segment.
        var payloadOffset: Int
        /// Its payload length.
        var payloadLength: Int
    }

    /// Where and why a scan stopped before the end of the segment.
    struct Stop: Equatable {
        /// Offset of the first byte that is not part of a valid record.
        var offset: Int
        /// What was wrong there.
        var reason: SpoolDamageReason
        /// True when the damage runs to the end of the file and nothing valid can follow it:
        /// the signature of a write that was cut short (a torn last record), as opposed to
        /// damage in the middle of the log.
        var reachesEnd: Bool
    }

    /// The outcome of scanning one segment.
    struct Scan: Equatable {
        /// Valid data records, in order.
        var records: [ScannedRecord] = []
        /// The highest acknowledgement watermark found, if any.
        var highestAcknowledgement: UInt64?
        /// Length of the valid prefix (the offset of `stop`, or the whole segment).
        var validLength = 0
        /// Why the scan stopped early; nil when every byte belonged to a valid record.
        var stop: Stop?
        /// The sequence the next data record must carry.
        var nextSequence: UInt64
    }

    /// Validates a segment's bytes record by record. Pure: no I/O, never traps on any input.
    ///
    /// - Parameters:
    ///   - bytes: the whole segment file.
    ///   - firstSequence: the data sequence the segment's name promises for its first record.
    ///   - maxPayloadBytes: larger length fields are treated as damage (a flipped high bit in a
    ///     length must not make recovery try to read gigabytes).
    static func scan(_ bytes: UnsafeRawBufferPointer, firstSequence: UInt64, maxPayloadBytes: Int) -> Scan {
        var result = Scan(nextSequence: firstSequence)
        var offset = 0
        let count = bytes.count

        func restIsZero(from start: Int) -> Bool {
            var index = start
            while index < count {
                if bytes[index] != 0 { return false }
                index += 1
            }
            return true
        }

        while offset < count {
            let available = count - offset
            if available < headerSize {
                result.stop = Stop(offset: offset, reason: .truncatedHeader(available: available), reachesEnd: true)
                break
            }
            let magicValue = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let kindByte = bytes[offset + 2]
            let reserved = bytes[offset + 3]
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
            let sequence = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            let storedChecksum = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self))

            if magicValue != magic || reserved != 0 {
                // A block of zeros running to the end is what a file system leaves after a
                // power loss when the size was updated but the data never reached the disk.
                if restIsZero(from: offset) {
                    result.stop = Stop(offset: offset, reason: .zeroFilled(bytes: available), reachesEnd: true)
                } else {
                    result.stop = Stop(offset: offset, reason: .badMagic, reachesEnd: false)
                }
                break
            }
            guard let kind = Kind(rawValue: kindByte) else {
                result.stop = Stop(offset: offset, reason: .unknownKind(kindByte), reachesEnd: false)
                break
            }
            if length > maxPayloadBytes || (kind == .acknowledgement && length != 0) {
                result.stop = Stop(offset: offset, reason: .implausibleLength(length), reachesEnd: false)
                break
            }
            let end = offset + headerSize + length
            if end > count {
                result.stop = Stop(
                    offset: offset,
                    reason: .truncatedPayload(expected: length, available: available - headerSize),
                    reachesEnd: true
                )
                break
            }
            let headerChecksum = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + 16)]))
            let checksum = CRC32C.checksum(
                UnsafeRawBufferPointer(rebasing: bytes[(offset + headerSize)..<end]),
                continuing: headerChecksum
            )
            if checksum != storedChecksum {
                result.stop = Stop(offset: offset, reason: .checksumMismatch, reachesEnd: end == count)
                break
            }
            switch kind {
            case .data:
                if sequence != result.nextSequence {
                    result.stop = Stop(
                        offset: offset,
                        reason: .unexpectedSequence(expected: result.nextSequence, found: sequence),
                        reachesEnd: false
                    )
                    break
                }
                result.records.append(
                    ScannedRecord(sequence: sequence, payloadOffset: offset + headerSize, payloadLength: length)
                )
                result.nextSequence = sequence &+ 1
            case .acknowledgement:
                result.highestAcknowledgement = max(result.highestAcknowledgement ?? 0, sequence)
            }
            if result.stop != nil { break }
            offset = end
        }
        result.validLength = result.stop?.offset ?? count
        return result
    }

    /// Array convenience for ``scan(_:firstSequence:maxPayloadBytes:)``.
    static func scan(_ bytes: [UInt8], firstSequence: UInt64, maxPayloadBytes: Int) -> Scan {
        bytes.withUnsafeBytes { scan($0, firstSequence: firstSequence, maxPayloadBytes: maxPayloadBytes) }
    }
}
