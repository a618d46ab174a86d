#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One open file of a spool — a segment, the lock file, or the spool directory itself (opened to
/// make its entries durable) — owning its descriptor. The descriptor never leaves this type and is
/// closed exactly once, in `deinit`, when the last reference goes.
///
/// A segment's file is shared by the spool (appends, payload reads) and a sync in progress on the
/// sync thread (``SpoolSyncPoint``): a segment compacted away or a spool closed while its file is
/// being flushed is closed after the flush, never under it — a descriptor number reused by
/// another `open` would otherwise receive the `fdatasync`, or worse, a later `pwrite`.
///
/// `Sendable`: immutable, and `pread`/`pwrite` take explicit offsets (no shared file position), so
/// any thread may call it; the spool's owner orders the writes.
final class SpoolFile: Sendable {
    /// How a file is opened, and the operation an error names when that fails.
    enum Access {
        /// An existing file, read and written.
        case readWrite
        /// A file that must not exist yet, created for reading and writing (a new segment).
        case createNew
        /// The directory's lock file, created if missing.
        case lock
        /// A directory, opened only to `fsync` its entries.
        case directory
        /// An existing file, only read (the dead-letter store read by the command line).
        case readOnly

        var flags: CInt {
            switch self {
            case .readWrite: O_RDWR | O_CLOEXEC
            case .createNew: O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC
            case .lock: O_RDWR | O_CREAT | O_CLOEXEC
            case .directory: O_RDONLY | O_DIRECTORY | O_CLOEXEC
            case .readOnly: O_RDONLY | O_CLOEXEC
            }
        }

        var operation: String {
            switch self {
            case .readWrite: "open"
            case .createNew: "create"
            case .lock: "open lock"
            case .directory: "open directory"
            case .readOnly: "open"
            }
        }
    }

    /// The path the file was opened at (for errors; a later rename does not update it).
    let path: String
    private let descriptor: CInt
    private let isDirectory: Bool
    /// The tests' failure injector (nil outside tests).
    private let faults: SpoolWriteFaults?

    /// Opens `path`; `faults` (tests only) makes its writes and flushes fail on demand.
    ///
    /// - Throws: ``SpoolError`` naming the operation, the path and `errno`.
    init(path: String, access: Access, faults: SpoolWriteFaults? = nil) throws {
        let descriptor = open(path, access.flags, 0o644)
        guard descriptor >= 0 else { throw SpoolError.io(access.operation, path: path, errno: errno) }
        self.path = path
        self.descriptor = descriptor
        self.isDirectory = access == .directory
        self.faults = faults
    }

    deinit {
        #if canImport(Glibc)
            _ = Glibc.close(descriptor)
        #elseif canImport(Musl)
            _ = Musl.close(descriptor)
        #else
            _ = Darwin.close(descriptor)
        #endif
    }

    /// Writes all of `bytes` at `offset` (`pwrite`, retried on `EINTR` and short writes).
    ///
    /// - Throws: ``SpoolError`` on failure, when part of the bytes may have reached the file.
    func write(_ bytes: [UInt8], at offset: Int) throws {
        if let faults, let fault = faults.writeFault(count: bytes.count) {
            try writeAll(Array(bytes[0..<fault.written]), at: offset)
            throw SpoolError.io("write", path: path, errno: fault.errno)
        }
        try writeAll(bytes, at: offset)
    }

    private func writeAll(_ bytes: [UInt8], at offset: Int) throws {
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

    /// Exactly `count` bytes at `offset` (`pread`); a file shorter than that is an error.
    func read(count length: Int, at offset: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let count = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + done, length - done, off_t(offset + done))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolError.io("pread", path: path, errno: errno)
            }
            if count == 0 {
                throw SpoolError.io("pread (file shorter than expected)", path: path, errno: EIO)
            }
            done += count
        }
        return bytes
    }

    /// The whole file, from offset 0 to its end.
    func readToEnd() throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let offset = bytes.count
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SpoolError.io("read", path: path, errno: errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }

    /// Cuts the file to `length` bytes.
    func truncate(to length: Int) throws {
        if ftruncate(descriptor, off_t(length)) != 0 { throw SpoolError.io("truncate", path: path, errno: errno) }
    }

    /// Forces the file's data to disk (`fdatasync`; `fsync` where there is none, and for a
    /// directory, whose entries are its data). Blocks until the disk has it: 0.1–3 ms on a
    /// virtual disk, far longer on a busy one — keep it off the cooperative pool and out of locks.
    func synchronize() throws {
        if let code = faults?.flushFault() {
            throw SpoolError.io(isDirectory ? "fsync directory" : "fdatasync", path: path, errno: code)
        }
        #if os(Linux)
            let result = isDirectory ? fsync(descriptor) : fdatasync(descriptor)
        #else
            let result = fsync(descriptor)
        #endif
        if result != 0 {
            throw SpoolError.io(isDirectory ? "fsync directory" : "fdatasync", path: path, errno: errno)
        }
    }

    /// Takes an exclusive `flock` without waiting; false when another open file holds it.
    func tryLockExclusively() throws -> Bool {
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return true }
        let code = errno
        if code == EWOULDBLOCK { return false }
        throw SpoolError.io("flock", path: path, errno: code)
    }

    /// Releases this file's `flock`.
    func unlock() {
        _ = flock(descriptor, LOCK_UN)
    }
}

/// The exclusive, non-blocking `flock` on `DIRECTORY/lock` that stops a second spool — in this
/// process or another — from opening the same directory. Held as long as the value lives: there
/// is exactly one, and dropping it releases the lock and closes the file.
struct SpoolDirectoryLock: ~Copyable {
    private let file: SpoolFile

    /// Takes the lock of `directory`.
    ///
    /// - Throws: ``SpoolError/locked(path:)`` when another spool holds it, else an I/O error.
    init(directory: String) throws {
        let file = try SpoolFile(path: directory + "/lock", access: .lock)
        guard try file.tryLockExclusively() else { throw SpoolError.locked(path: directory) }
        self.file = file
    }

    /// Releases the directory lock explicitly before closing its descriptor. A `flock` belongs to
    /// the open file description, which a child process forked at that moment (any `Process`
    /// started elsewhere in this program) shares until it execs: `close` alone would leave the
    /// lock held by the child for that window, and an immediate reopen would find it "in use".
    deinit {
        file.unlock()
    }
}

/// Operations on a spool directory's names (no descriptor involved).
enum SpoolDirectory {
    /// Renames each file to `NAME.corrupt` (or `NAME.corrupt-2`, …) and returns the new paths.
    static func moveAside(_ paths: [String]) throws -> [String] {
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

    /// Deletes a file.
    static func remove(_ path: String) throws {
        if unlink(path) != 0 { throw SpoolError.io("unlink", path: path, errno: errno) }
    }

    /// Makes creations, renames and deletions in the directory durable (blocks like
    /// ``SpoolFile/synchronize()``).
    static func synchronize(_ directory: String) throws {
        try SpoolFile(path: directory, access: .directory).synchronize()
    }
}
