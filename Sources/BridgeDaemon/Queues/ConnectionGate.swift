import Locking

/// Open while a connection is up: a task that can only go on while connected waits here, woken
/// when the connection comes back (no polling), or when its task is cancelled.
final class ConnectionGate: Sendable {
    private struct State {
        var open = false
        var waiters = WaiterQueue<Void>()
    }

    private let state = Locked(State())

    /// Whether the connection is up, as last reported.
    var isOpen: Bool { state.withLock { $0.open } }

    /// The connection is up (`true`) or down.
    func set(open: Bool) {
        state.withLock { state in
            state.open = open
            return open ? state.waiters.resumeAll(returning: ()) : WakeUp()
        }.resume()
    }

    /// Returns once the gate is open, or the task is cancelled.
    func waitUntilOpen() async {
        await state.wait(in: { $1(&$0.waiters) }, until: { $0.open ? () : nil }, ifCancelled: { _ in })
    }
}
