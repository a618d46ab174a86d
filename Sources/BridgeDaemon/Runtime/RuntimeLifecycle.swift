/// Whether a ``BridgeRuntime``'s service has run, and who waits for it to have released what it
/// holds (its spools' directory locks, its MQTT client id, its Pusher connection).
///
/// A reload stops a bridge and starts its successor on the same spools: the successor may open
/// them only once the old runtime has closed them, which happens at the end of its `run()`, after
/// every task of the bridge has ended (docs/contract.md §3). A runtime whose service never ran (a
/// reload that raced a shutdown) is ended by whoever stops it.
struct RuntimeLifecycle: ~Copyable {
    private enum Phase {
        case notStarted
        case running
        case ended
    }

    /// What ``waitForEnd(_:)`` found.
    enum Wait {
        /// The runtime runs: the continuation is resumed (with false) when it has ended.
        case waiting
        /// It has ended already: resume at once.
        case alreadyEnded
        /// Its service never ran, and now never will: the caller releases what it holds.
        case neverRan
    }

    private var phase = Phase.notStarted
    private var waiters: [CheckedContinuation<Bool, Never>] = []

    /// Whether `run()` runs and has not ended yet.
    var isRunning: Bool {
        if case .running = phase { return true }
        return false
    }

    /// `run()` begins; false when the runtime was stopped before it ever ran (run returns at once).
    mutating func runStarted() -> Bool {
        guard case .notStarted = phase else { return false }
        phase = .running
        return true
    }

    /// `run()` has released everything: the waiters to resume.
    mutating func ended() -> [CheckedContinuation<Bool, Never>] {
        phase = .ended
        defer { waiters.removeAll() }
        return waiters
    }

    /// Waits for the end of `run()`, or says why there is nothing to wait for.
    mutating func waitForEnd(_ continuation: CheckedContinuation<Bool, Never>) -> Wait {
        switch phase {
        case .notStarted:
            phase = .ended
            return .neverRan
        case .running:
            waiters.append(continuation)
            return .waiting
        case .ended:
            return .alreadyEnded
        }
    }
}
