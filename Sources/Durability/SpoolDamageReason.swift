/// What was wrong with the bytes where recovery stopped reading a segment.
public enum SpoolDamageReason: Sendable, Equatable, CustomStringConvertible {
    /// Fewer bytes than a record header are left.
    case truncatedHeader(available: Int)
    /// The header promises more payload than the file holds.
    case truncatedPayload(expected: Int, available: Int)
    /// Only zero bytes are left (a power loss after the file grew but before data reached disk).
    case zeroFilled(bytes: Int)
    /// The bytes are not a record header.
    case badMagic
    /// The header names a record kind this version does not know.
    case unknownKind(UInt8)
    /// The length field is larger than any record the spool writes.
    case implausibleLength(Int)
    /// The CRC-32C does not match: a flipped bit or a partly written record.
    case checksumMismatch
    /// A valid record with the wrong sequence number: a record went missing or came from elsewhere.
    case unexpectedSequence(expected: UInt64, found: UInt64)
    /// A segment file's name does not continue the sequence of the segment before it.
    case segmentGap(expected: UInt64, found: UInt64)

    /// A one-line explanation for logs.
    public var description: String {
        switch self {
        case .truncatedHeader(let available): "truncated header (\(available) of 20 bytes)"
        case .truncatedPayload(let expected, let available): "truncated payload (\(available) of \(expected) bytes)"
        case .zeroFilled(let bytes): "\(bytes) zero bytes at the end"
        case .badMagic: "not a record header"
        case .unknownKind(let kind): "unknown record kind \(kind)"
        case .implausibleLength(let length): "implausible record length \(length)"
        case .checksumMismatch: "checksum mismatch"
        case .unexpectedSequence(let expected, let found): "sequence \(found) where \(expected) was expected"
        case .segmentGap(let expected, let found): "segment starts at \(found) where \(expected) was expected"
        }
    }
}
