import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A test seam at the file-write level: makes the writes and flushes of the segment files of a
/// spool that carries it (``SpoolConfiguration/writeFaults``) fail on demand, as a full or failing
/// disk does — a failing write may first write part of its bytes (a torn record). Only tests set
/// it; a spool without it never pays more than a nil check.
final class SpoolWriteFaults: Sendable, Equatable {
    private struct State {
        var writeErrno: Int32?
        var bytesBeforeFailure = 0
        var flushErrno: Int32?
        var failedWrites = 0
        var failedFlushes = 0
    }

    private let state = Mutex(State())

    /// Faults that let everything succeed until told otherwise.
    init() {}

    /// From now on every write fails with `errno` after writing at most `bytesBeforeFailure` of
    /// its bytes (0: nothing reaches the file).
    func failWrites(errno: Int32 = ENOSPC, bytesBeforeFailure: Int = 0) {
        state.withLock {
            $0.writeErrno = errno
            $0.bytesBeforeFailure = max(0, bytesBeforeFailure)
        }
    }

    /// From now on every flush (`fdatasync`) of a segment fails with `errno`.
    func failFlushes(errno: Int32 = EIO) {
        state.withLock { $0.flushErrno = errno }
    }

    /// Writes and flushes succeed again (space was freed, the disk came back).
    func heal() {
        state.withLock {
            $0.writeErrno = nil
            $0.flushErrno = nil
        }
    }

    /// Writes refused so far.
    var failedWrites: Int { state.withLock { $0.failedWrites } }
    /// Flushes refused so far.
    var failedFlushes: Int { state.withLock { $0.failedFlushes } }

    /// For a write of `count` bytes: nil to write them all, else how many to write before failing
    /// with which `errno`.
    func writeFault(count: Int) -> (written: Int, errno: Int32)? {
        state.withLock { state in
            guard let code = state.writeErrno else { return nil }
            state.failedWrites += 1
            return (min(count, state.bytesBeforeFailure), code)
        }
    }

    /// For a flush: nil to flush, else the `errno` it fails with.
    func flushFault() -> Int32? {
        state.withLock { state in
            guard let code = state.flushErrno else { return nil }
            state.failedFlushes += 1
            return code
        }
    }

    /// The same injector (identity): a configuration carrying it equals only one carrying it too.
    static func == (lhs: SpoolWriteFaults, rhs: SpoolWriteFaults) -> Bool { lhs === rhs }
}
