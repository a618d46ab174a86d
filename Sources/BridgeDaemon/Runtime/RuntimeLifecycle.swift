import Locking

/// Whether a ``BridgeRuntime``'s service has run, and who waits for it to have released what it
/// holds (its spools' directory locks, its MQTT client id, its Pusher connection). Kept under the
/// runtime's one lock (``RuntimeDecisions``).
///
/// A reload stops a bridge and starts its successor on the same spools: the successor may open
/// them only once the old runtime has closed them, which happens at the end of its `run()`, after
/// every task of the bridge has ended (docs/contract.md §3). A runtime whose service never ran (a
/// reload that raced a shutdown) is ended by whoever stops it.
struct RuntimeLifecycle: Sendable {
    private enum Phase {
        case notStarted
        case running
        case ended
    }

    private var phase = Phase.notStarted
    /// Tasks waiting for the end of `run()` (``BridgeRuntime/stop(grace:)``); each gets false.
    var endWaiters = WaiterQueue<Bool>()

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

    /// `run()` has released everything: the waiters to resume once the lock is released.
    mutating func ended() -> WakeUp<Bool> {
        phase = .ended
        return endWaiters.resumeAll(returning: false)
    }

    /// What a task about to wait for the end of `run()` finds: `nil` while it runs (wait), false
    /// when it has ended, true when its service never ran and now never will (the caller then
    /// releases what the runtime holds).
    mutating func endOrNeverRan() -> Bool? {
        switch phase {
        case .notStarted:
            phase = .ended
            return true
        case .running:
            return nil
        case .ended:
            return false
        }
    }
}
