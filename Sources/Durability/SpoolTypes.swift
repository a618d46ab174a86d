/// When the spool forces appended records from the page cache to the disk (`fdatasync`).
///
/// Every append is handed to the kernel with `write(2)` before `append` returns, so **every
/// policy survives a crash or SIGKILL of the process**: the page cache belongs to the kernel.
/// The policies differ only in what survives a **power loss or kernel crash**:
///
/// | policy | cost per append | lost on power loss |
/// |---|---|---|
/// | `always` | one `fdatasync` (≈ a disk flush) | nothing that `append` returned for |
/// | `batch(records: n)` | one `fdatasync` per `n` appends | at most the last `n - 1` appends, plus what came after the owner's last `sync()` |
/// | `onSync` (default) | none on the append path | what came after the owner's last ``Spool/sync()`` (the daemon: ≤ 1 s) |
/// | `never` | none | whatever the kernel had not written back yet (Linux: up to ≈ 30 s by default) |
///
/// The default is `onSync` with the owner calling ``Spool/sync()`` about once a second:
/// docs/contract.md §5.6 promises that daemon *restarts* lose nothing (true for every policy); a power
/// loss costing at most ~1 s of messages is the usual trade-off of message brokers (mosquitto's
/// own persistence only writes every `autosave_interval`, Redis' `appendfsync everysec`).
/// `batch(64)` was the default until the bridge benchmark (issue 7) showed its `fdatasync`
/// calls — hundreds a second at 50k messages/s, 0.1–3 ms each on this VM's disk, taken while
/// the direction's lock is held — stalling Pusher → MQTT. Measured with
/// `swift run -c release spool-bench` on the project's 2-core VM (virtual disk, shared with
/// other builds; ranges over 4 runs, 100 B / 1 KiB records): `always` 330–7 400 appends/s,
/// `batch(64)` 14 000–226 000/s, `never` 380 000–1 070 000/s.
///
/// Acknowledgement records are never forced to disk by themselves: losing one only means the
/// records it covered are delivered again after a restart (at-least-once), never lost.
public enum SpoolFsyncPolicy: Sendable, Equatable {
    /// `fdatasync` after every append.
    case always
    /// `fdatasync` after every `records` appends (and on ``Spool/sync()``, rotation and close).
    case batch(records: Int)
    /// `fdatasync` only in ``Spool/sync()`` (the owner's timer: the daemon calls it every
    /// second, on the spools' sync thread) and on ``Spool/close()`` — never on the append path,
    /// where one `fdatasync` (0.1–3 ms on a virtual disk) stalls the whole direction; a segment
    /// rotated out and the new segment's directory entry are flushed by the next sync. A power
    /// loss takes at most the records of the last timer period; a process crash takes nothing.
    case onSync
    /// Never force; only ``Spool/sync()`` flushes.
    case never

    /// The recommended default, see the type's documentation.
    public static let `default` = SpoolFsyncPolicy.onSync
}

/// Tuning of a ``Spool``.
public struct SpoolConfiguration: Sendable, Equatable {
    /// When appends are forced to disk.
    public var fsync: SpoolFsyncPolicy
    /// A segment file is closed and a new one started when the next record would make it larger
    /// than this. Compaction deletes whole segments, so the disk holds at most the pending
    /// records plus about two segments (one partly delivered, one being written).
    public var segmentBytes: Int
    /// Largest payload `append` accepts; also the largest length field recovery believes.
    public var maxPayloadBytes: Int
    /// Payload bytes of pending records kept in memory as well, so reading them back needs no
    /// `pread` (records past this stay on disk only; recovered records are never cached).
    public var memoryCacheBytes: Int
    /// The watermark is written at the latest after this many acknowledgements (it also travels
    /// with the next append, and is written by `sync`, rotation and `close`). A crash redelivers
    /// at most this many acknowledged records, plus those since the owner's last `sync`.
    public var acknowledgementBatch: Int
    /// Tests only: makes the segment files' writes and flushes fail on demand (a full disk).
    var writeFaults: SpoolWriteFaults?

    /// - Parameters:
    ///   - fsync: default ``SpoolFsyncPolicy/default``.
    ///   - segmentBytes: default 4 MiB.
    ///   - maxPayloadBytes: default 16 MiB (MQTT payloads can be large; Pusher events are ≤ 10 KiB).
    ///   - memoryCacheBytes: default 1 MiB (at 50k messages/s of 1 KiB with 10 ms in flight, half of it).
    ///   - acknowledgementBatch: default 256.
    public init(
        fsync: SpoolFsyncPolicy = .default, segmentBytes: Int = 4 << 20, maxPayloadBytes: Int = 16 << 20,
        memoryCacheBytes: Int = 1 << 20, acknowledgementBatch: Int = 256
    ) {
        self.fsync = fsync
        self.segmentBytes = segmentBytes
        self.maxPayloadBytes = maxPayloadBytes
        self.memoryCacheBytes = memoryCacheBytes
        self.acknowledgementBatch = max(1, acknowledgementBatch)
    }
}

/// One pending spool record: its sequence number and its opaque payload.
public struct SpoolRecord: Sendable, Equatable {
    /// Position in the spool's total order; consecutive, starting at 1 for a new spool.
    public var sequence: UInt64
    /// The bytes given to ``Spool/append(_:)``.
    public var payload: [UInt8]

    /// A record with this sequence and payload.
    public init(sequence: UInt64, payload: [UInt8]) {
        self.sequence = sequence
        self.payload = payload
    }
}

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

/// One place where recovery found damage, and what it did about it.
public struct SpoolDamage: Sendable, Equatable {
    /// What recovery did.
    public enum Repair: Sendable, Equatable {
        /// The damage was a torn last record (a write cut short by a crash): the segment was
        /// truncated at `offset`, discarding this many bytes. Nothing that `append` had
        /// returned for under the `always` policy can be lost this way.
        case truncatedTornTail(discardedBytes: Int)
        /// Damage in the middle of the log: the valid prefix was kept, the damaged file and every
        /// later segment were renamed to these paths (kept for inspection, never read again).
        case movedAside([String])
    }

    /// The segment file's path.
    public var file: String
    /// Offset in the file of the first byte not part of a valid record.
    public var offset: Int
    /// What was wrong there.
    public var reason: SpoolDamageReason
    /// What recovery did.
    public var repair: Repair
}

/// What ``Spool/init(directory:configuration:logger:)`` found and did while recovering.
public struct SpoolRecoveryReport: Sendable, Equatable {
    /// Segment files found in the directory.
    public var segmentsFound = 0
    /// Records recovered as pending (not yet delivered).
    public var pendingRecords = 0
    /// The delivered watermark recovered: every record up to it counts as delivered.
    public var deliveredWatermark: UInt64 = 0
    /// The sequence the next append gets.
    public var nextSequence: UInt64 = 1
    /// Every damaged place, in file order; empty after a clean shutdown.
    public var damage: [SpoolDamage] = []
}

/// An error from the spool: what it was doing, where, and the system's reason.
public struct SpoolError: Error, Sendable, Equatable, CustomStringConvertible {
    private enum Code: Sendable, Equatable {
        case io(operation: String, errno: Int32)
        case fileSystem(operation: String, message: String)
        case payloadTooLarge(size: Int, limit: Int)
        case locked
        case closed
        case invalidConfiguration(String)
    }

    private let code: Code
    /// The file or directory concerned.
    public let path: String

    /// A system call failed.
    static func io(_ operation: String, path: String, errno: Int32) -> SpoolError {
        SpoolError(code: .io(operation: operation, errno: errno), path: path)
    }

    /// A Foundation file-system call failed.
    static func fileSystem(_ operation: String, path: String, message: String) -> SpoolError {
        SpoolError(code: .fileSystem(operation: operation, message: message), path: path)
    }

    /// `append` was given more than `maxPayloadBytes`.
    static func payloadTooLarge(size: Int, limit: Int, path: String) -> SpoolError {
        SpoolError(code: .payloadTooLarge(size: size, limit: limit), path: path)
    }

    /// Another spool (another daemon, or another instance in this process) holds the directory.
    static func locked(path: String) -> SpoolError { SpoolError(code: .locked, path: path) }

    /// The spool was used after ``Spool/close()``.
    static func closed(path: String) -> SpoolError { SpoolError(code: .closed, path: path) }

    /// The configuration cannot work (e.g. a zero batch size).
    static func invalidConfiguration(_ message: String, path: String) -> SpoolError {
        SpoolError(code: .invalidConfiguration(message), path: path)
    }

    /// True for a failed system call on the spool's files (disk full, I/O error, quota, a file
    /// that cannot be created): the disk's trouble, not the message's; a ``DeliveryBacklog``
    /// degrades to memory on it (docs/contract.md §7.6).
    public var isDiskFailure: Bool {
        if case .io = code { return true }
        return false
    }

    /// True for ``payloadTooLarge``, which the caller should treat as a bad message, not a bad disk.
    public var isPayloadTooLarge: Bool {
        if case .payloadTooLarge = code { return true }
        return false
    }

    /// A one-line explanation naming the path.
    public var description: String {
        switch code {
        case .io(let operation, let errno):
            "spool \(path): \(operation) failed: \(SpoolError.describe(errno: errno)) (errno \(errno))"
        case .fileSystem(let operation, let message):
            "spool \(path): \(operation) failed: \(message)"
        case .payloadTooLarge(let size, let limit):
            "spool \(path): payload of \(size) bytes exceeds the limit of \(limit) bytes"
        case .locked:
            "spool \(path): directory is in use by another spool (lock held)"
        case .closed:
            "spool \(path): used after close"
        case .invalidConfiguration(let message):
            "spool \(path): invalid configuration: \(message)"
        }
    }

    private static func describe(errno: Int32) -> String {
        guard let message = strerror(errno) else { return "unknown error" }
        return String(cString: message)
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
