import Locking

/// The client's updates for one consumer, handed over in batches: ``next()`` returns everything
/// that arrived since the consumer last looked, in order (the order of ``PusherClient/updates(bufferingPolicy:)``).
///
/// Made for a consumer that keeps up with a busy connection: one wake-up and one lock per batch
/// instead of per update, and no generic `AsyncStream` machinery per update. Unbounded, like
/// `updates()` by default: read it.
///
/// Ends (``next()`` returns `nil`) once ``finish()`` was called and everything was taken, or when
/// the task waiting in ``next()`` is cancelled; the client then stops feeding it.
public final class PusherUpdateBatches: Sendable {
    private struct State {
        var pending: [PusherUpdate] = []
        var waiter: CheckedContinuation<[PusherUpdate]?, Never>?
        var finished = false
    }

    private let state = Locked(State())

    init() {}

    /// Adds one update (the client, under its own lock, so every consumer sees one order).
    /// Returns false once the consumer went away: the client then forgets this sink.
    func append(_ update: PusherUpdate) -> Bool {
        let (accepted, waiter) = state.withLock { state -> (Bool, CheckedContinuation<[PusherUpdate]?, Never>?) in
            guard !state.finished else { return (false, nil) }
            guard let waiter = state.waiter else {
                state.pending.append(update)
                return (true, nil)
            }
            state.waiter = nil
            return (true, waiter)
        }
        // Outside our lock (a cancellation handler takes it): the waiting consumer gets this one
        // update directly, nothing was queued before it.
        waiter?.resume(returning: [update])
        return accepted
    }

    /// Everything that arrived since the last call, oldest first, waiting while there is nothing;
    /// `nil` once finished and drained, or when the calling task is cancelled. One consumer.
    public func next() async -> [PusherUpdate]? {
        if let ready = take() { return ready }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[PusherUpdate]?, Never>) in
                let ready: [PusherUpdate]?? = state.withLock { state in
                    if !state.pending.isEmpty { return .some(Self.takeAll(&state.pending)) }
                    if state.finished || Task.isCancelled {
                        state.finished = true
                        return .some(nil)
                    }
                    state.waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.finished = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// What is pending, without waiting; `nil` when nothing is.
    private func take() -> [PusherUpdate]? {
        state.withLock { state in state.pending.isEmpty ? nil : Self.takeAll(&state.pending) }
    }

    /// Moves the pending updates out (no copy: the consumer gets the buffer).
    private static func takeAll(_ pending: inout [PusherUpdate]) -> [PusherUpdate] {
        var taken: [PusherUpdate] = []
        swap(&taken, &pending)
        return taken
    }

    /// No more updates: ``next()`` returns what is pending, then `nil`.
    public func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}
