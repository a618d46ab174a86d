#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a POSIX mutex.
///
/// Why not `Synchronization.Mutex`: on Linux it locks with raw futex calls that ThreadSanitizer
/// cannot see, so every access from two threads is reported as a race (measured: dozens of false
/// reports per run of this target's tests under `--sanitize=thread`). `pthread_mutex_lock` is
/// intercepted by TSan, so real races stay visible and locked accesses do not drown them.
///
/// `@unchecked Sendable` at this C boundary. Why it is safe: `value` is only reached through
/// `withLock`, which holds the mutex for the whole access; the mutex lives at a fixed heap
/// address from `init` to `deinit`; and only `Sendable` values can be stored.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
