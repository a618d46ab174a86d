#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value guarded by a POSIX mutex: the project's one lock type.
///
/// Why not `Synchronization.Mutex`: on Linux it locks with raw futex calls that ThreadSanitizer
/// cannot see, so every access from two threads is reported as a race (measured: dozens of false
/// reports per run of the MQTT client's tests and every test of the daemon under
/// `--sanitize=thread`). `pthread_mutex_lock` is intercepted by TSan, so real races stay visible
/// and locked accesses do not drown them. The API is `Mutex`'s (`init(_:)`, `withLock(_:)`, the
/// value `sending` in and out, non-copyable values allowed), so a `Mutex` is replaced by changing
/// only its type name.
///
/// `@unchecked Sendable` at this C boundary. Why it is safe: the value is only reached through
/// `withLock`, which holds the mutex for the whole access; the mutex and the value live at fixed
/// heap addresses from `init` to `deinit`; values enter (`init`) and leave (`withLock`'s result)
/// as `sending`, so no non-`Sendable` reference escapes the lock un-transferred — the same
/// contract as `Mutex`, which is `Sendable` for every value type.
public final class Locked<Value: ~Copyable>: @unchecked Sendable {
    // Usable from inlined code: `withLock` is inlined into its callers (other modules included),
    // so it is specialized for their value and result types instead of being called generically.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// A lock around `initialValue`.
    public init(_ initialValue: consuming sending Value) {
        value = .allocate(capacity: 1)
        value.initialize(to: initialValue)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result: ~Copyable, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
