#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starts `body` on a new detached POSIX thread named `name` (truncated to the 15 bytes Linux keeps),
/// for work that blocks — a libmosquitto network loop, a child process being waited for — and so
/// must not run on the cooperative pool. This is Foundation's `Thread.detachNewThread` without
/// Foundation: the daemon links FoundationEssentials only (docs/architecture.md "What the binary
/// links").
///
/// - Returns: false when the thread could not be created (`pthread_create` failed: no memory or a
///   thread limit; or ``DetachedThreadTesting/refusesCreation`` is set); `body` then never runs, and
///   the caller must end what waits for it (not discardable for that reason).
public func detachThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    if DetachedThreadTesting.refusesCreation { return false }
    let start = DetachedThreadStart(name: name, body: body)
    let context = Unmanaged.passRetained(start).toOpaque()
    #if canImport(Darwin)
        var thread: pthread_t?
    #else
        var thread = pthread_t()
    #endif
    let created = pthread_create(
        &thread, nil,
        { context in
            // `context` is never nil: it is the retained `DetachedThreadStart` passed below.
            guard let context else { return nil }
            let start = Unmanaged<DetachedThreadStart>.fromOpaque(context).takeRetainedValue()
            start.run()
            return nil
        }, context)
    guard created == 0 else {
        Unmanaged<DetachedThreadStart>.fromOpaque(context).release()
        return false
    }
    #if canImport(Darwin)
        if let thread { pthread_detach(thread) }
    #else
        pthread_detach(thread)
    #endif
    return true
}

/// Test hook for the callers' failure paths.
public enum DetachedThreadTesting {
    /// While true for a task (`DetachedThreadTesting.$refusesCreation.withValue(true) { … }`),
    /// ``detachThread(name:_:)`` called from it (or its child tasks) fails as a failed
    /// `pthread_create` would. A task-local value: tests running in parallel are not affected.
    @TaskLocal public static var refusesCreation = false
}

/// What a thread started by ``detachThread(name:_:)`` runs: its name, then its body.
private final class DetachedThreadStart: Sendable {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }

    /// Names the calling thread (best effort: a thread without its name still runs) and runs the body.
    func run() {
        #if canImport(Darwin)
            _ = pthread_setname_np(name)
        #else
            // Glibc's module does not export pthread_setname_np (it needs _GNU_SOURCE); the kernel takes
            // the name written to the thread's `comm`, 15 bytes at most (a longer write fails: EINVAL).
            let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if descriptor >= 0 {
                let bytes = Array(name.utf8.prefix(15))
                _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                close(descriptor)
            }
        #endif
        body()
    }
}
