import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A bridge's kept dead letters (docs/contract.md §8.3): `STATE_DIR/<bridge>/dead-letters/letters.log`,
/// an append-only log of ``DeadLetterRecord``s in the spool's CRC-checked record frame
/// (`SpoolRecordFormat`), bounded by `max_dead_letters` (the oldest letter evicted and counted).
///
/// Crash safety is the spool's: every change is one `write` of whole records, so a process killed
/// at any moment leaves at most one torn record at the end, which the next open cuts off and
/// counts; damage in the middle costs only the records it hit (``DeadLetterLog``). Appends reach
/// the page cache at once (a SIGKILL loses nothing) and the disk at the next ``synchronize()``
/// (the daemon's housekeeping, about every second), compaction or close.
///
/// One writer at a time: the store holds the directory's `flock` while open (the daemon, or the
/// command line when no daemon runs). ``read(directory:)`` reads without the lock and never writes.
/// Not `Sendable`: its owner calls it under its own lock.
public final class DeadLetterStore {
    /// What opening found, for the log and the metrics.
    public struct Recovery: Sendable, Equatable {
        /// A record cut short at the end was removed (0 or 1).
        public var tornRecords = 0
        /// Damaged or unreadable records skipped in the middle.
        public var skippedRecords = 0
        public var total: Int { tornRecords + skippedRecords }
    }

    /// A redrive's message in a spool: the direction (0 Pusher → MQTT, 1 MQTT → Pusher) and sequence.
    public struct Submission: Sendable, Equatable {
        public var direction: UInt8
        public var sequence: UInt64
        public init(direction: UInt8, sequence: UInt64) {
            self.direction = direction
            self.sequence = sequence
        }
    }

    /// Where one letter's record lies in the log.
    private struct Location {
        var offset: Int
        var length: Int
    }

    public let directory: String
    public let maxLetters: Int
    public private(set) var recovery = Recovery()
    /// Letters evicted by the bound since the store was opened.
    public private(set) var evicted = 0

    private var file: SpoolFile
    private var size: Int
    private var nextSequence: UInt64
    private var nextID: UInt64 = 1
    /// Live letters by id; `order` keeps their ids ascending (oldest first).
    private var locations: [UInt64: Location] = [:]
    private var order: [UInt64] = []
    /// What a redrive put in a spool for a letter, by id: (direction, sequence) pairs.
    private var submissions: [UInt64: [Submission]] = [:]
    /// Records in the log that no longer describe a live letter (removed letters, removals).
    private var deadRecords = 0
    private let lock: SpoolDirectoryLock

    /// The conventional directory: `STATE_DIR/<bridge>/dead-letters`.
    public static func directory(stateDirectory: String, bridge: String) -> String {
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        return base + "/" + bridge + "/dead-letters"
    }

    /// The log file in a store's directory.
    public static func logPath(_ directory: String) -> String { directory + "/letters.log" }

    /// Opens (creating if needed) and recovers the store; a damaged log is rewritten clean.
    ///
    /// - Throws: ``SpoolError`` (`locked` when another process holds it).
    public init(directory: String, maxLetters: Int) throws {
        guard maxLetters >= 1 else { throw SpoolError.invalidConfiguration("max_dead_letters must be at least 1", path: directory) }
        self.directory = directory
        self.maxLetters = maxLetters
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw SpoolError.fileSystem("create directory", path: directory, message: "\(error)")
        }
        lock = try SpoolDirectoryLock(directory: directory)
        let path = Self.logPath(directory)
        file = try SpoolFile(path: path, access: .lock)
        let scan = DeadLetterLog.scan(try file.readToEnd())
        size = scan.validLength
        nextSequence = scan.nextSequence
        recovery = Recovery(tornRecords: scan.tornTail ? 1 : 0, skippedRecords: scan.skipped)
        apply(scan.entries)
        if recovery.skippedRecords > 0 {
            try compact()
        } else if scan.tornTail {
            try file.truncate(to: size)
            try file.synchronize()
        }
        // The bound may have been lowered since the letters were written.
        try evictOverBound(adding: 0)
    }

    private func apply(_ entries: [DeadLetterLog.Entry]) {
        for entry in entries {
            switch entry.record {
            case .letter(let letter):
                if locations[letter.id] == nil { order.append(letter.id) }
                locations[letter.id] = Location(offset: entry.offset, length: entry.length)
                nextID = max(nextID, letter.id &+ 1)
            case .removal(let ids):
                deadRecords += 1
                for id in ids where locations.removeValue(forKey: id) != nil { deadRecords += 1 }
                for id in ids { deadRecords += submissions.removeValue(forKey: id)?.count ?? 0 }
            case .nextID(let id):
                nextID = max(nextID, id)
            case .submitted(let id, let direction, let sequence):
                submissions[id, default: []].append(Submission(direction: direction, sequence: sequence))
            }
        }
        order = order.filter { locations[$0] != nil }.sorted()
        submissions = submissions.filter { locations[$0.key] != nil }
    }

    /// Letters kept now.
    public var count: Int { order.count }
    /// Their ids, oldest first.
    public var ids: [UInt64] { order }

    /// Keeps a letter under a new id (evicting the oldest when full); returns the id.
    @discardableResult
    public func append(_ letter: StoredDeadLetter) throws -> UInt64 {
        try evictOverBound(adding: 1)
        var letter = letter
        letter.id = nextID
        let payload = DeadLetterRecord.letter(letter).encoded()
        let frame = SpoolRecordFormat.encode(kind: .data, sequence: nextSequence, payload: payload)
        try file.write(frame, at: size)
        locations[letter.id] = Location(offset: size, length: frame.count)
        order.append(letter.id)
        size += frame.count
        nextSequence += 1
        nextID += 1
        return letter.id
    }

    /// The letter kept under `id`, or nil.
    public func letter(_ id: UInt64) throws -> StoredDeadLetter? {
        guard let location = locations[id] else { return nil }
        let frame = try file.read(count: location.length, at: location.offset)
        guard case .letter(let letter) = DeadLetterRecord.decode(Array(frame[SpoolRecordFormat.headerSize...])) else { return nil }
        return letter
    }

    /// Every letter, oldest first.
    public func letters() throws -> [StoredDeadLetter] {
        try order.compactMap { try letter($0) }
    }

    /// Forgets these letters (delivered, dead-lettered again, or purged); returns the ids that
    /// were kept. One record, one write.
    @discardableResult
    public func remove(_ ids: [UInt64]) throws -> [UInt64] {
        let present = ids.filter { locations[$0] != nil }
        guard !present.isEmpty else { return [] }
        try writeRemoval(present)
        try compactIfWorthIt()
        return present
    }

    /// Records that a redrive put what letter `id` became in a spool (`direction`, up to `sequence`).
    public func markSubmitted(_ id: UInt64, direction: UInt8, sequence: UInt64) throws {
        guard locations[id] != nil else { return }
        let payload = DeadLetterRecord.submitted(id: id, direction: direction, sequence: sequence).encoded()
        let frame = SpoolRecordFormat.encode(kind: .data, sequence: nextSequence, payload: payload)
        try file.write(frame, at: size)
        size += frame.count
        nextSequence += 1
        submissions[id, default: []].append(Submission(direction: direction, sequence: sequence))
    }

    /// The letters a redrive had put in a spool and not yet forgotten (a crash came between),
    /// oldest first, with their submissions.
    public var submitted: [(id: UInt64, submissions: [Submission])] {
        submissions.keys.sorted().map { ($0, submissions[$0] ?? []) }
    }

    /// Forces what was written to disk.
    public func synchronize() throws { try file.synchronize() }

    /// ``synchronize()`` on the spools' sync thread (`Spool.syncThread`), off the caller's thread.
    public func synchronizeOnSyncThread() async throws {
        let file = self.file
        try await Spool.syncThread.runIfActive { try file.synchronize() }
    }

    private func writeRemoval(_ ids: [UInt64]) throws {
        let payload = DeadLetterRecord.removal(ids).encoded()
        let frame = SpoolRecordFormat.encode(kind: .data, sequence: nextSequence, payload: payload)
        try file.write(frame, at: size)
        size += frame.count
        nextSequence += 1
        deadRecords += 1
        let gone = Set(ids)
        for id in ids where locations.removeValue(forKey: id) != nil { deadRecords += 1 }
        for id in ids { deadRecords += submissions.removeValue(forKey: id)?.count ?? 0 }
        order.removeAll { gone.contains($0) }
    }

    private func evictOverBound(adding: Int) throws {
        let excess = order.count + adding - maxLetters
        guard excess > 0 else { return }
        let oldest = Array(order.prefix(excess))
        try writeRemoval(oldest)
        evicted += oldest.count
        try compactIfWorthIt()
    }

    /// Rewrites the log when most of it no longer describes a live letter.
    private func compactIfWorthIt() throws {
        if deadRecords > 1024, deadRecords > order.count { try compact() }
    }

    /// Writes the live letters to a new log (next id first), makes it durable, renames it over the old one.
    func compact() throws {
        let path = Self.logPath(directory)
        let temporary = path + ".new"
        if access(temporary, F_OK) == 0 { try SpoolDirectory.remove(temporary) }
        let target = try SpoolFile(path: temporary, access: .createNew)
        var bytes = SpoolRecordFormat.encode(kind: .data, sequence: 1, payload: DeadLetterRecord.nextID(nextID).encoded())
        var sequence: UInt64 = 2
        var moved: [UInt64: Location] = [:]
        for id in order {
            let old = locations[id]!
            let frame = try file.read(count: old.length, at: old.offset)
            let payload = Array(frame[SpoolRecordFormat.headerSize...])
            let record = SpoolRecordFormat.encode(kind: .data, sequence: sequence, payload: payload)
            moved[id] = Location(offset: bytes.count, length: record.count)
            bytes.append(contentsOf: record)
            sequence += 1
            for submission in submissions[id] ?? [] {
                let marker = DeadLetterRecord.submitted(id: id, direction: submission.direction, sequence: submission.sequence)
                bytes.append(contentsOf: SpoolRecordFormat.encode(kind: .data, sequence: sequence, payload: marker.encoded()))
                sequence += 1
            }
        }
        try target.write(bytes, at: 0)
        try target.synchronize()
        if rename(temporary, path) != 0 { throw SpoolError.io("rename", path: temporary, errno: errno) }
        try SpoolDirectory.synchronize(directory)
        file = target
        size = bytes.count
        nextSequence = sequence
        locations = moved
        deadRecords = 0
    }

    /// Reads a store's letters without taking its lock and without changing the file (the
    /// command line's `list` and `show`, also while the daemon runs). A missing store is empty.
    public static func read(directory: String) throws -> (letters: [StoredDeadLetter], recovery: Recovery) {
        let path = logPath(directory)
        guard access(path, F_OK) == 0 else { return ([], Recovery()) }
        let file = try SpoolFile(path: path, access: .readOnly)
        let scan = DeadLetterLog.scan(try file.readToEnd())
        var letters: [UInt64: StoredDeadLetter] = [:]
        for entry in scan.entries {
            switch entry.record {
            case .letter(let letter): letters[letter.id] = letter
            case .removal(let ids): for id in ids { letters.removeValue(forKey: id) }
            case .nextID, .submitted: break
            }
        }
        let recovery = Recovery(tornRecords: scan.tornTail ? 1 : 0, skippedRecords: scan.skipped)
        return (letters.values.sorted { $0.id < $1.id }, recovery)
    }
}
