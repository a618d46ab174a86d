import DequeModule
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An append-only, crash-safe, order-preserving on-disk log of opaque records: the durable
/// half of a bridge direction's buffer (docs/contract.md §4 `[bridge.buffer] persist`, §5.6).
///
/// One spool per bridge and direction, in its own directory, e.g.
/// `STATE_DIR/<bridge>/pusher-to-mqtt.spool/`; the daemon chooses the path.
///
/// ## Life of a record
/// 1. ``append(_:)`` writes the record and returns its sequence number (1, 2, 3, … — never
///    reused within a directory).
/// 2. The owner reads pending records in order with ``read(after:limit:)`` / ``peek()`` and
///    delivers them.
/// 3. ``acknowledge(_:)`` (one record, in any order) or ``acknowledge(upTo:)`` marks records
///    delivered. The **delivered watermark** is the highest sequence S such that every record
///    ≤ S is acknowledged. It is written to the log as an acknowledgement record lazily: with
///    the next append (in the same `write`), on ``sync()``, rotation and ``close()``, or after
///    ``SpoolConfiguration/acknowledgementBatch`` acknowledgements — one extra `write` per
///    message would cost more than the whole rest of the spool. A record acknowledged out of
///    order above the watermark is no longer returned by `read` in this process, but only the
///    written watermark is durable.
/// 4. Compaction: records live in segment files of about ``SpoolConfiguration/segmentBytes``;
///    a segment is deleted as soon as every record in it is at or below the watermark, so disk
///    use stays bounded by what is pending plus about two segments.
///
/// ## Recovery and guarantees
/// Opening a directory recovers it: the result is exactly the records above the durable
/// watermark, in order. **At-least-once**: records acknowledged shortly before a crash (after
/// the last acknowledgement record reached the file, or out of order above the watermark) are
/// returned again. A torn or corrupt *last* record (a write cut short) is detected by its
/// length and CRC-32C, reported in ``recovery`` and truncated away; damage in the *middle*
/// stops recovery there: the valid prefix is kept and the damaged file plus every later
/// segment are renamed `*.corrupt` for inspection. Recovery never traps on any file content.
/// What survives a power loss depends on ``SpoolFsyncPolicy``; a process crash loses nothing
/// `append` returned for, under every policy.
///
/// ## Resources
/// One open file descriptor per segment (pending bytes / `segmentBytes` + 1: 17 for a full
/// 64 MiB buffer with the default 4 MiB segments) plus the lock file; an index entry of
/// 32 bytes per pending record in memory. Payloads appended by this process are also kept in
/// memory while their total stays under ``SpoolConfiguration/memoryCacheBytes`` (1 MiB) (the usual
/// case: delivered within milliseconds), so `read` needs no `pread`; beyond that, and for
/// recovered records, payloads stay on disk until read.
///
/// ## Threads
/// Not `Sendable`: one owner calls it synchronously (the daemon's outbox of that direction, under
/// its lock); appends and reads hand bytes to and from the kernel's page cache. The call that
/// waits for the disk — `fdatasync` — need not block the owner: ``prepareSync()`` under the
/// owner's lock, ``SpoolSyncPoint/flushOnSyncThread()`` without it, ``finishSync(_:flushed:)``
/// under it again (``sync()`` does all three on the calling thread). A directory lock (`flock` on
/// `lock`) stops a second spool — in this process or another — from opening the same directory.
public final class Spool {
    /// The directory holding the segment files.
    public let directory: String
    /// The configuration in force.
    public let configuration: SpoolConfiguration
    /// What opening the directory found and repaired.
    public let recovery: SpoolRecoveryReport

    /// Every record up to this sequence is delivered (0: none yet).
    public internal(set) var deliveredWatermark: UInt64
    /// The sequence of the last appended record (0: none yet).
    public internal(set) var lastSequence: UInt64
    /// Payload bytes of the pending (unacknowledged) records.
    public internal(set) var pendingBytes: Int = 0
    /// Bytes of all segment files together.
    public internal(set) var diskBytes: Int = 0
    /// Every record up to this sequence was on disk when the last finished sync or flush of this
    /// process returned (0: none yet; recovered records count once a sync covered them).
    public internal(set) var syncedSequence: UInt64 = 0
    /// The delivered watermark the log on disk carried at that sync: a restart after a power loss
    /// redelivers at most what was acknowledged after it.
    public internal(set) var syncedWatermark: UInt64 = 0

    /// Records not yet acknowledged.
    public var pendingCount: Int { index.count - acknowledgedAboveWatermark.count }

    /// Where a record's payload lives (and, while the memory cache has room, the payload itself).
    struct Location {
        var segment: SpoolSegment
        var offset: Int
        var length: Int
        var cached: [UInt8]? = nil
    }

    var segments: Deque<SpoolSegment> = []
    /// Locations of the records above the watermark, by consecutive sequence starting at
    /// `deliveredWatermark + 1`.
    var index: Deque<Location> = []
    var acknowledgedAboveWatermark: Set<UInt64> = []
    var appendsSinceSync = 0
    /// Payload bytes held in `index` entries' `cached`.
    var cachedBytes = 0
    /// Acknowledgements since the last acknowledgement record was written (0: the file's
    /// watermark is current).
    var unwrittenAcknowledgements = 0
    /// The watermark of the newest acknowledgement record in the log (written, maybe not flushed).
    var writtenWatermark: UInt64 = 0
    /// Files written (or recovered) since they were last flushed, oldest first.
    var unflushedFiles: [SpoolFile] = []
    /// A segment file was created since the directory was last flushed.
    var directoryUnflushed = false
    /// Held while open; dropping it lets another spool open the directory.
    private var lock: SpoolDirectoryLock?
    private(set) var isClosed = false
    let logger: Logger

    /// Opens (creating if needed) the spool in `directory` and recovers its records.
    ///
    /// - Throws: ``SpoolError`` when the directory cannot be created, read or locked, or a
    ///   file operation fails. Damaged contents are *not* errors: they are repaired and reported
    ///   in ``recovery`` (and logged at warning level).
    public init(directory: String, configuration: SpoolConfiguration = .init(), logger: Logger? = nil) throws {
        self.directory = directory
        self.configuration = configuration
        self.logger = logger ?? Logger(label: "pusher-mqtt-bridge.spool")
        if case .batch(let records) = configuration.fsync, records < 1 {
            throw SpoolError.invalidConfiguration("fsync batch size must be at least 1", path: directory)
        }
        guard configuration.segmentBytes > 0, configuration.maxPayloadBytes >= 0 else {
            throw SpoolError.invalidConfiguration("segment and payload sizes must be positive", path: directory)
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw SpoolError.fileSystem("create directory", path: directory, message: "\(error)")
        }
        // Released again (by its deinit) if recovery throws.
        let lock = try SpoolDirectoryLock(directory: directory)

        var report = SpoolRecoveryReport()
        let recovered = try Spool.recover(directory: directory, configuration: configuration, report: &report)
        var pendingIndex: Deque<Location> = []
        var pendingBytes = 0
        for entry in recovered.records where entry.sequence > recovered.watermark {
            pendingIndex.append(Location(segment: entry.segment, offset: entry.offset, length: entry.length))
            pendingBytes += entry.length
        }
        report.pendingRecords = pendingIndex.count
        report.deliveredWatermark = recovered.watermark
        report.nextSequence = recovered.lastSequence + 1
        self.lock = consume lock
        self.segments = Deque(recovered.segments)
        self.lastSequence = recovered.lastSequence
        self.deliveredWatermark = recovered.watermark
        self.writtenWatermark = recovered.watermark
        self.index = pendingIndex
        self.pendingBytes = pendingBytes
        self.diskBytes = recovered.segments.reduce(0) { $0 + $1.size }
        // What a crashed process left may still be in the page cache only: the first sync flushes it.
        self.unflushedFiles = recovered.segments.compactMap { $0.size > 0 ? $0.file : nil }
        self.recovery = report

        for damage in report.damage {
            self.logger.warning(
                "spool damage repaired",
                metadata: [
                    "spool.file": "\(damage.file)",
                    "spool.offset": "\(damage.offset)",
                    "spool.reason": "\(damage.reason)",
                    "spool.repair": "\(damage.repair)",
                ]
            )
        }
        self.logger.debug(
            "spool opened",
            metadata: [
                "spool.directory": "\(directory)",
                "spool.pending": "\(report.pendingRecords)",
                "spool.watermark": "\(report.deliveredWatermark)",
            ]
        )
    }

    // MARK: appending

    /// Appends a record and returns its sequence number. The bytes are with the kernel when
    /// this returns (and on disk if the fsync policy says so).
    ///
    /// - Throws: ``SpoolError`` for a payload over `maxPayloadBytes` (``SpoolError/isPayloadTooLarge``)
    ///   or a failed write (disk full…); after a failed write the segment is cut back to its
    ///   previous length, so the log stays valid. A failed `fdatasync` (policy `always` or a
    ///   full batch) is thrown too, but the record *was* written and stays pending: treat the
    ///   disk as failing rather than appending the same payload again.
    @discardableResult
    public func append(_ payload: [UInt8]) throws -> UInt64 {
        try ensureOpen()
        guard payload.count <= configuration.maxPayloadBytes else {
            throw SpoolError.payloadTooLarge(size: payload.count, limit: configuration.maxPayloadBytes, path: directory)
        }
        let recordSize = SpoolRecordFormat.headerSize + payload.count
        if let active = segments.last, active.hasData, active.size + recordSize > configuration.segmentBytes {
            try rotate()
        }
        guard let active = segments.last else { throw SpoolError.closed(path: directory) }
        return try write(records: [payload], to: active)[0]
    }

    /// Appends several records with one `write` (the burst a consumer took at once) and returns
    /// their sequence numbers, in order. Same guarantees as ``append(_:)`` for each record; a
    /// burst that would not fit in the active segment is appended record by record (rotation).
    @discardableResult
    public func append(contentsOf payloads: [[UInt8]]) throws -> [UInt64] {
        try ensureOpen()
        guard payloads.count > 1 else { return try payloads.map { try append($0) } }
        let totalSize = payloads.reduce(0) { $0 + SpoolRecordFormat.headerSize + $1.count }
        guard payloads.allSatisfy({ $0.count <= configuration.maxPayloadBytes }), let active = segments.last,
            active.size + totalSize + SpoolRecordFormat.headerSize <= configuration.segmentBytes
        else { return try payloads.map { try append($0) } }
        return try write(records: payloads, to: active)
    }

    /// Writes data records for `payloads` (after the pending acknowledgement record, if any) to
    /// the active segment in one `write`, indexes them, and applies the fsync policy.
    private func write(records payloads: [[UInt8]], to active: SpoolSegment) throws -> [UInt64] {
        // A pending acknowledgement record travels in the same write as the data records.
        var bytes = pendingAcknowledgementRecord()
        let acknowledgementSize = bytes.count
        var sequence = lastSequence
        for payload in payloads {
            sequence += 1
            bytes += SpoolRecordFormat.encode(kind: .data, sequence: sequence, payload: payload)
        }
        try write(bytes, to: active)
        if acknowledgementSize > 0 {
            acknowledgementWritten()
            active.size += acknowledgementSize
            diskBytes += acknowledgementSize
        }
        var sequences: [UInt64] = []
        sequences.reserveCapacity(payloads.count)
        for payload in payloads {
            let cache = cachedBytes + payload.count <= configuration.memoryCacheBytes
            if cache { cachedBytes += payload.count }
            index.append(
                Location(
                    segment: active, offset: active.size + SpoolRecordFormat.headerSize, length: payload.count,
                    cached: cache ? payload : nil))
            active.size += SpoolRecordFormat.headerSize + payload.count
            lastSequence += 1
            active.lastDataSequence = lastSequence
            pendingBytes += payload.count
            diskBytes += SpoolRecordFormat.headerSize + payload.count
            sequences.append(lastSequence)
        }
        switch configuration.fsync {
        case .always:
            try flushNow()
        case .batch(let records):
            appendsSinceSync += payloads.count
            if appendsSinceSync >= records { try flushNow() }
        case .onSync, .never:
            break
        }
        return sequences
    }

    // MARK: reading

    /// The oldest pending record, or nil when everything is delivered.
    public func peek() throws -> SpoolRecord? {
        try read(limit: 1).first
    }

    /// Up to `limit` pending records with a sequence above `after`, in order. Records
    /// acknowledged out of order are skipped.
    public func read(after: UInt64 = 0, limit: Int) throws -> [SpoolRecord] {
        try ensureOpen()
        var result: [SpoolRecord] = []
        guard limit > 0, after < lastSequence else { return result }
        var sequence = max(after, deliveredWatermark) + 1
        while sequence <= lastSequence, result.count < limit {
            if !acknowledgedAboveWatermark.contains(sequence) {
                let location = index[Int(sequence - deliveredWatermark - 1)]
                result.append(SpoolRecord(sequence: sequence, payload: try location.cached ?? readPayload(at: location)))
            }
            sequence += 1
        }
        return result
    }

    /// The oldest pending record's sequence and payload size, without reading the payload
    /// (drop-oldest overflow needs only these). Always `deliveredWatermark + 1` when anything
    /// is pending: a record acknowledged right above the watermark moves the watermark.
    public var oldestPending: (sequence: UInt64, byteCount: Int)? {
        guard deliveredWatermark < lastSequence, let location = index.first else { return nil }
        return (deliveredWatermark + 1, location.length)
    }

    // MARK: closing

    /// Flushes (unless the policy is `never`) and closes every file. Further calls throw.
    /// After a ``sync()`` (or a finished ``SpoolSyncPoint``) with nothing written since, there
    /// is nothing to flush and closing does not wait for the disk.
    public func close() throws {
        guard !isClosed else { return }
        defer {
            for segment in segments { segment.release() }
            segments.removeAll()
            unflushedFiles.removeAll()
            lock = nil
            isClosed = true
        }
        try writeAcknowledgement()
        if configuration.fsync != .never { try flushNow() }
    }

    // MARK: internals

    func ensureOpen() throws {
        if isClosed { throw SpoolError.closed(path: directory) }
    }

    /// Closes the active segment for appends and starts a new one named after the next sequence.
    /// With the `onSync` (and `never`) policy the old segment and the directory are flushed by
    /// the next sync, not here: rotation happens on the append path.
    private func rotate() throws {
        try writeAcknowledgement()
        guard segments.last != nil else { throw SpoolError.closed(path: directory) }
        let flushesHere = configuration.fsync.flushesOnAppend
        if flushesHere { try flushNow() }
        let first = lastSequence + 1
        let path = Spool.segmentPath(directory: directory, firstSequence: first)
        let file = try SpoolFile(path: path, access: .createNew, faults: configuration.writeFaults)
        segments.append(SpoolSegment(firstSequence: first, file: file, size: 0, lastDataSequence: first - 1))
        directoryUnflushed = true
        if flushesHere { try flushNow() }
    }

    /// Writes `bytes` at the end of `segment`'s valid records.
    func write(_ bytes: [UInt8], to segment: SpoolSegment) throws {
        let file = try segment.openFile(directory: directory)
        do {
            try file.write(bytes, at: segment.size)
        } catch {
            // Cut a partial write back off so the next record starts where the log is valid.
            try? file.truncate(to: segment.size)
            throw error
        }
        if unflushedFiles.last !== file { unflushedFiles.append(file) }
    }

    private func readPayload(at location: Location) throws -> [UInt8] {
        try location.segment.openFile(directory: directory).read(count: location.length, at: location.offset)
    }
}

extension SpoolFsyncPolicy {
    /// True for the policies that flush on the append path (`always`, `batch`): they also flush
    /// a rotated segment and the directory at once.
    var flushesOnAppend: Bool {
        switch self {
        case .always, .batch: true
        case .onSync, .never: false
        }
    }
}
