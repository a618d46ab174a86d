import Locking

/// Open while a connection is up: a task that can only go on while connected waits here, woken
/// when the connection comes back (no polling), or when its task is cancelled.
final class ConnectionGate: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Locked(State())

    /// Whether the connection is up, as last reported.
    var isOpen: Bool { state.withLock { $0.open } }

    /// The connection is up (`true`) or down.
    func set(open: Bool) {
        let woken: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.open = open
            guard open else { return [] }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns once the gate is open, or the task is cancelled.
    func waitUntilOpen() async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.open || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
