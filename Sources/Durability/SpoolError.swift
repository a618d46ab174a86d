#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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

    /// True when another spool or store (another process) holds the directory's lock.
    public var isLocked: Bool {
        if case .locked = code { return true }
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
