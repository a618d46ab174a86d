import DequeModule
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An append-only, crash-safe, order-preserving on-disk log of opaque records: the durable
/// half of a bridge direction's buffer (DESIGN §4 `[bridge.buffer] persist`, §5.6).
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
/// Not `Sendable`: one task owns a spool (the daemon's delivery task for that direction) and
/// calls it synchronously; the calls block on file I/O. A directory lock (`flock` on
/// `lock`) stops a second spool — in this process or another — from opening the same directory.
public final class Spool {
    /// The directory holding the segment files.
    public let directory: String
    /// The configuration in force.
    public let configuration: SpoolConfiguration
    /// What opening the directory found and repaired.
    public let recovery: SpoolRecoveryReport

    /// Every record up to this sequence is delivered (0: none yet).
    public private(set) var deliveredWatermark: UInt64
    /// The sequence of the last appended record (0: none yet).
    public private(set) var lastSequence: UInt64
    /// Payload bytes of the pending (unacknowledged) records.
    public private(set) var pendingBytes: Int = 0
    /// Bytes of all segment files together.
    public private(set) var diskBytes: Int = 0

    /// Records not yet acknowledged.
    public var pendingCount: Int { index.count - acknowledgedAboveWatermark.count }

    /// One segment file, open for reading (and, for the last one, appending).
    private final class Segment {
        let firstSequence: UInt64
        let path: String
        let descriptor: Int32
        var size: Int
        var lastDataSequence: UInt64

        init(firstSequence: UInt64, path: String, descriptor: Int32, size: Int, lastDataSequence: UInt64) {
            self.firstSequence = firstSequence
            self.path = path
            self.descriptor = descriptor
            self.size = size
            self.lastDataSequence = lastDataSequence
        }

        var hasData: Bool { lastDataSequence >= firstSequence }
    }

    /// Where a record's payload lives (and, while the memory cache has room, the payload itself).
    private struct Location {
        var descriptor: Int32
        var offset: Int
        var length: Int
        var cached: [UInt8]? = nil
    }

    private var segments: Deque<Segment> = []
    /// Locations of the records above the watermark, by consecutive sequence starting at
    /// `deliveredWatermark + 1`.
    private var index: Deque<Location> = []
    private var acknowledgedAboveWatermark: Set<UInt64> = []
    private var appendsSinceSync = 0
    /// Payload bytes held in `index` entries' `cached`.
    private var cachedBytes = 0
    /// Acknowledgements since the last acknowledgement record was written (0: the file's
    /// watermark is current).
    private var unwrittenAcknowledgements = 0
    private var lockDescriptor: Int32
    private var isClosed = false
    private let logger: Logger

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
        let lock = try Spool.lockDirectory(directory)
        lockDescriptor = lock

        var report = SpoolRecoveryReport()
        let recovered: Recovered
        do {
            recovered = try Spool.recover(directory: directory, configuration: configuration, report: &report)
        } catch {
            Spool.unlockAndClose(lock)
            throw error
        }
        var pendingIndex: Deque<Location> = []
        var pendingBytes = 0
        for entry in recovered.records where entry.sequence > recovered.watermark {
            pendingIndex.append(Location(descriptor: entry.descriptor, offset: entry.offset, length: entry.length))
            pendingBytes += entry.length
        }
        report.pendingRecords = pendingIndex.count
        report.deliveredWatermark = recovered.watermark
        report.nextSequence = recovered.lastSequence + 1
        self.segments = recovered.segments
        self.lastSequence = recovered.lastSequence
        self.deliveredWatermark = recovered.watermark
        self.index = pendingIndex
        self.pendingBytes = pendingBytes
        self.diskBytes = recovered.segments.reduce(0) { $0 + $1.size }
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

    deinit {
        if !isClosed {
            for segment in segments { _ = systemClose(segment.descriptor) }
            Spool.unlockAndClose(lockDescriptor)
        }
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
    private func write(records payloads: [[UInt8]], to active: Segment) throws -> [UInt64] {
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
            unwrittenAcknowledgements = 0
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
                    descriptor: active.descriptor, offset: active.size + SpoolRecordFormat.headerSize, length: payload.count,
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
            try flush(active)
        case .batch(let records):
            appendsSinceSync += payloads.count
            if appendsSinceSync >= records { try flush(active) }
        case .onSync, .never:
            break
        }
        return sequences
    }

    /// Forces everything appended so far to disk (`fdatasync`). Call it on a timer (e.g. every
    /// second) with the `batch` policy to bound what a power loss can take.
    public func sync() throws {
        try ensureOpen()
        try writeAcknowledgement()
        if let active = segments.last { try flush(active) }
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

    // MARK: acknowledging

    /// Marks one record delivered. Acknowledgements may arrive in any order; the durable
    /// watermark only moves over a gap-free prefix.
    ///
    /// - Returns: false when `sequence` is not pending (already acknowledged, or never appended).
    @discardableResult
    public func acknowledge(_ sequence: UInt64) throws -> Bool {
        try ensureOpen()
        guard sequence > deliveredWatermark, sequence <= lastSequence,
            !acknowledgedAboveWatermark.contains(sequence)
        else { return false }
        pendingBytes -= index[Int(sequence - deliveredWatermark - 1)].length
        if sequence == deliveredWatermark + 1 {
            try advanceWatermark(to: sequence)
        } else {
            acknowledgedAboveWatermark.insert(sequence)
        }
        return true
    }

    /// Marks every record up to `sequence` (clamped to ``lastSequence``) delivered.
    ///
    /// - Returns: how many records became delivered by this call.
    @discardableResult
    public func acknowledge(upTo sequence: UInt64) throws -> Int {
        try ensureOpen()
        let target = min(sequence, lastSequence)
        guard target > deliveredWatermark else { return 0 }
        var newlyDelivered = 0
        var current = deliveredWatermark + 1
        while current <= target {
            if acknowledgedAboveWatermark.remove(current) == nil {
                pendingBytes -= index[Int(current - deliveredWatermark - 1)].length
                newlyDelivered += 1
            }
            current += 1
        }
        try advanceWatermark(to: target)
        return newlyDelivered
    }

    /// Flushes (unless the policy is `never`) and closes every file. Further calls throw.
    public func close() throws {
        guard !isClosed else { return }
        defer {
            for segment in segments { _ = systemClose(segment.descriptor) }
            Spool.unlockAndClose(lockDescriptor)
            segments.removeAll()
            isClosed = true
        }
        try writeAcknowledgement()
        if configuration.fsync != .never, let active = segments.last {
            try flush(active)
        }
    }

    // MARK: internals

    private func ensureOpen() throws {
        if isClosed { throw SpoolError.closed(path: directory) }
    }

    /// Moves the watermark to `sequence` (all records up to it are acknowledged), then past
    /// any records acknowledged out of order right after it, writes the acknowledgement record
    /// and deletes segments that hold nothing pending.
    private func advanceWatermark(to sequence: UInt64) throws {
        var watermark = sequence
        while acknowledgedAboveWatermark.remove(watermark + 1) != nil {
            watermark += 1
        }
        for _ in 0..<Int(watermark - deliveredWatermark) {
            cachedBytes -= index.removeFirst().cached?.count ?? 0
        }
        deliveredWatermark = watermark
        unwrittenAcknowledgements += 1
        if unwrittenAcknowledgements >= configuration.acknowledgementBatch { try writeAcknowledgement() }

        // Compaction: a segment whose every data record is delivered is no longer needed.
        // Never the active one (it carries the newest acknowledgement record); the oldest
        // surviving segment's name keeps the watermark recoverable (name − 1 ≤ watermark).
        // The deletion is not made durable with a directory fsync: a segment that reappears
        // after a power loss holds only records at or below the watermark, or — if the
        // acknowledgement record was lost too — records that are then delivered again.
        while segments.count > 1, let oldest = segments.first, oldest.lastDataSequence <= watermark {
            _ = systemClose(oldest.descriptor)
            if unlink(oldest.path) != 0 {
                throw SpoolError.io("unlink", path: oldest.path, errno: errno)
            }
            diskBytes -= oldest.size
            segments.removeFirst()
        }
    }

    /// The acknowledgement record for the current watermark if the file does not have it yet.
    private func pendingAcknowledgementRecord() -> [UInt8] {
        guard unwrittenAcknowledgements > 0 else { return [] }
        return SpoolRecordFormat.encode(kind: .acknowledgement, sequence: deliveredWatermark, payload: [])
    }

    /// Writes the current watermark if the file does not have it yet.
    private func writeAcknowledgement() throws {
        let record = pendingAcknowledgementRecord()
        guard !record.isEmpty, let active = segments.last else { return }
        try write(record, to: active)
        unwrittenAcknowledgements = 0
        active.size += record.count
        diskBytes += record.count
    }

    /// Closes the active segment for appends and starts a new one named after the next sequence.
    private func rotate() throws {
        try writeAcknowledgement()
        guard let active = segments.last else { throw SpoolError.closed(path: directory) }
        if configuration.fsync != .never { try flush(active) }
        let first = lastSequence + 1
        let path = Spool.segmentPath(directory: directory, firstSequence: first)
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SpoolError.io("create", path: path, errno: errno) }
        segments.append(
            Segment(firstSequence: first, path: path, descriptor: descriptor, size: 0, lastDataSequence: first - 1)
        )
        if configuration.fsync != .never { try Spool.syncDirectory(directory) }
    }

    private func write(_ bytes: [UInt8], to segment: Segment) throws {
        do {
            try Spool.writeAll(bytes, descriptor: segment.descriptor, offset: segment.size, path: segment.path)
        } catch {
            // Cut a partial write back off so the next record starts where the log is valid.
            _ = ftruncate(segment.descriptor, off_t(segment.size))
            throw error
        }
    }

    private func flush(_ segment: Segment) throws {
        appendsSinceSync = 0
        #if os(Linux)
        let result = fdatasync(segment.descriptor)
        #else
        let result = fsync(segment.descriptor)
        #endif
        if result != 0 { throw SpoolError.io("fdatasync", path: segment.path, errno: errno) }
    }

    private func readPayload(at location: Location) throws -> [UInt8] {
        var payload = [UInt8](repeating: 0, count: location.length)
        var done = 0
        while done < location.length {
            let count = payload.withUnsafeMutableBytes { buffer in
                pread(
                    location.descriptor,
                    buffer.baseAddress! + done,
                    location.length - done,
                    off_t(location.offset + done)
                )
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolError.io("pread", path: directory, errno: errno)
            }
            if count == 0 {
                throw SpoolError.io("pread (file shorter than expected)", path: directory, errno: EIO)
            }
            done += count
        }
        return payload
    }
}

// MARK: - recovery and file helpers

extension Spool {
    /// One recovered data record.
    private struct RecoveredRecord {
        var sequence: UInt64
        var descriptor: Int32
        var offset: Int
        var length: Int
    }

    /// The state recovery hands to `init`.
    private struct Recovered {
        var segments: Deque<Segment> = []
        var records: [RecoveredRecord] = []
        var lastSequence: UInt64 = 0
        var watermark: UInt64 = 0
    }

    static let segmentSuffix = ".seg"

    /// The conventional spool directory of one bridge direction:
    /// `STATE_DIR/<bridge>/<direction>.spool` (DESIGN §4 `state_dir`), e.g.
    /// `/var/lib/pusher-mqtt-bridge/factory/mqtt-to-pusher.spool`. Bridge names are
    /// `[a-z0-9_-]+` (validated by the config), so they are safe as path components.
    public static func directory(stateDirectory: String, bridge: String, direction: String) -> String {
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        return base + "/" + bridge + "/" + direction + ".spool"
    }

    /// `DIRECTORY/00000000000000000042.seg`: 20 digits so names sort like their numbers.
    static func segmentPath(directory: String, firstSequence: UInt64) -> String {
        let digits = String(firstSequence)
        return directory + "/" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + segmentSuffix
    }

    /// The first sequences of the segment files in `directory`, sorted.
    static func segmentNames(in directory: String) throws -> [UInt64] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw SpoolError.fileSystem("list directory", path: directory, message: "\(error)")
        }
        return names.compactMap { name -> UInt64? in
            guard name.hasSuffix(segmentSuffix) else { return nil }
            let stem = name.dropLast(segmentSuffix.count)
            guard stem.count == 20, stem.allSatisfy(\.isASCII), stem.allSatisfy(\.isNumber) else { return nil }
            return UInt64(stem)
        }.sorted()
    }

    private static func recover(
        directory: String,
        configuration: SpoolConfiguration,
        report: inout SpoolRecoveryReport
    ) throws -> Recovered {
        var recovered = Recovered()
        let names = try segmentNames(in: directory)
        report.segmentsFound = names.count
        var expected: UInt64?
        var highestAcknowledgement: UInt64 = 0
        var opened: [Int32] = []
        do {
            for (position, first) in names.enumerated() {
                let path = segmentPath(directory: directory, firstSequence: first)
                let isLast = position == names.count - 1
                if let expected, first != expected {
                    let moved = try moveAside(
                        names[position...].map { segmentPath(directory: directory, firstSequence: $0) }
                    )
                    report.damage.append(
                        SpoolDamage(
                            file: path,
                            offset: 0,
                            reason: .segmentGap(expected: expected, found: first),
                            repair: .movedAside(moved)
                        )
                    )
                    break
                }
                let bytes = try readWholeFile(path)
                let scan = SpoolRecordFormat.scan(
                    bytes,
                    firstSequence: first,
                    maxPayloadBytes: configuration.maxPayloadBytes
                )
                var keptLength = bytes.count
                var stopAfterThis = false
                if let stop = scan.stop {
                    keptLength = scan.validLength
                    if isLast && stop.reachesEnd {
                        try truncateFile(path, to: keptLength)
                        report.damage.append(
                            SpoolDamage(
                                file: path,
                                offset: stop.offset,
                                reason: stop.reason,
                                repair: .truncatedTornTail(discardedBytes: bytes.count - keptLength)
                            )
                        )
                    } else {
                        // Keep the damaged file whole for inspection, continue with its valid prefix.
                        var moved = try moveAside([path])
                        try writeNewFile(path, bytes: Array(bytes[0..<keptLength]))
                        moved += try moveAside(
                            names[(position + 1)...].map { segmentPath(directory: directory, firstSequence: $0) }
                        )
                        report.damage.append(
                            SpoolDamage(
                                file: path,
                                offset: stop.offset,
                                reason: stop.reason,
                                repair: .movedAside(moved)
                            )
                        )
                        stopAfterThis = true
                    }
                }
                let descriptor = open(path, O_RDWR | O_CLOEXEC)
                guard descriptor >= 0 else { throw SpoolError.io("open", path: path, errno: errno) }
                opened.append(descriptor)
                let segment = Segment(
                    firstSequence: first,
                    path: path,
                    descriptor: descriptor,
                    size: keptLength,
                    lastDataSequence: scan.nextSequence - 1
                )
                recovered.segments.append(segment)
                for record in scan.records {
                    recovered.records.append(
                        RecoveredRecord(
                            sequence: record.sequence,
                            descriptor: descriptor,
                            offset: record.payloadOffset,
                            length: record.payloadLength
                        )
                    )
                }
                if let acknowledgement = scan.highestAcknowledgement {
                    highestAcknowledgement = max(highestAcknowledgement, acknowledgement)
                }
                expected = scan.nextSequence
                if stopAfterThis { break }
            }
            if recovered.segments.isEmpty {
                let path = segmentPath(directory: directory, firstSequence: 1)
                let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
                guard descriptor >= 0 else { throw SpoolError.io("create", path: path, errno: errno) }
                opened.append(descriptor)
                recovered.segments.append(
                    Segment(firstSequence: 1, path: path, descriptor: descriptor, size: 0, lastDataSequence: 0)
                )
                if configuration.fsync != .never { try syncDirectory(directory) }
            }
        } catch {
            for descriptor in opened { _ = systemClose(descriptor) }
            throw error
        }
        let first = recovered.segments.first?.firstSequence ?? 1
        recovered.lastSequence = (recovered.segments.last?.lastDataSequence) ?? 0
        // The oldest surviving segment's name bounds the watermark from below (older segments
        // were only deleted once fully delivered); acknowledgement records raise it. A watermark
        // beyond the last record (its data lost, the acknowledgement not) is clamped.
        recovered.watermark = min(max(first - 1, highestAcknowledgement), recovered.lastSequence)
        return recovered
    }

    /// Renames each file to `NAME.corrupt` (or `NAME.corrupt-2`, …) and returns the new paths.
    private static func moveAside(_ paths: [String]) throws -> [String] {
        var moved: [String] = []
        for path in paths {
            var target = path + ".corrupt"
            var attempt = 2
            while access(target, F_OK) == 0 {
                target = path + ".corrupt-\(attempt)"
                attempt += 1
            }
            if rename(path, target) != 0 { throw SpoolError.io("rename", path: path, errno: errno) }
            moved.append(target)
        }
        return moved
    }

    private static func readWholeFile(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SpoolError.io("open", path: path, errno: errno) }
        defer { _ = systemClose(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolError.io("read", path: path, errno: errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }

    private static func truncateFile(_ path: String, to length: Int) throws {
        if systemTruncate(path, off_t(length)) != 0 { throw SpoolError.io("truncate", path: path, errno: errno) }
    }

    private static func writeNewFile(_ path: String, bytes: [UInt8]) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SpoolError.io("create", path: path, errno: errno) }
        defer { _ = systemClose(descriptor) }
        try writeAll(bytes, descriptor: descriptor, offset: 0, path: path)
        if fsync(descriptor) != 0 { throw SpoolError.io("fsync", path: path, errno: errno) }
    }

    static func writeAll(_ bytes: [UInt8], descriptor: Int32, offset: Int, path: String) throws {
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                pwrite(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolError.io("write", path: path, errno: errno)
            }
            done += count
        }
    }

    /// Makes creations, renames and deletions in the directory durable.
    static func syncDirectory(_ directory: String) throws {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SpoolError.io("open directory", path: directory, errno: errno) }
        defer { _ = systemClose(descriptor) }
        if fsync(descriptor) != 0 { throw SpoolError.io("fsync directory", path: directory, errno: errno) }
    }

    /// Releases the directory lock explicitly before closing its descriptor. A `flock` belongs to
    /// the open file description, which a child process forked at that moment (any `Process`
    /// started elsewhere in this program) shares until it execs: `close` alone would leave the
    /// lock held by the child for that window, and an immediate reopen would find it "in use".
    static func unlockAndClose(_ descriptor: Int32) {
        _ = flock(descriptor, LOCK_UN)
        _ = systemClose(descriptor)
    }

    /// Takes an exclusive, non-blocking `flock` on `DIRECTORY/lock`.
    private static func lockDirectory(_ directory: String) throws -> Int32 {
        let path = directory + "/lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SpoolError.io("open lock", path: path, errno: errno) }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            _ = systemClose(descriptor)
            if code == EWOULDBLOCK { throw SpoolError.locked(path: directory) }
            throw SpoolError.io("flock", path: path, errno: code)
        }
        return descriptor
    }
}

/// `close(2)`, named apart from ``Spool/close()``.
private func systemClose(_ descriptor: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(descriptor)
    #elseif canImport(Musl)
    return Musl.close(descriptor)
    #else
    return Darwin.close(descriptor)
    #endif
}

/// `read(2)`, named apart from ``Spool/read(after:limit:)``.
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.read(descriptor, buffer, count)
    #elseif canImport(Musl)
    return Musl.read(descriptor, buffer, count)
    #else
    return Darwin.read(descriptor, buffer, count)
    #endif
}

/// `truncate(2)`.
private func systemTruncate(_ path: String, _ length: off_t) -> Int32 {
    #if canImport(Glibc)
    return Glibc.truncate(path, length)
    #elseif canImport(Musl)
    return Musl.truncate(path, length)
    #else
    return Darwin.truncate(path, length)
    #endif
}
