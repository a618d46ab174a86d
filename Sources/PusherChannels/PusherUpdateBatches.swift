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
        /// The consumer waiting in ``next()``.
        var consumer = WaiterQueue<[PusherUpdate]?>()
        var finished = false
    }

    private let state = Locked(State())

    init() {}

    /// Adds one update (the client, under its own lock, so every consumer sees one order).
    /// Returns false once the consumer went away: the client then forgets this sink.
    func append(_ update: PusherUpdate) -> Bool {
        let (accepted, consumer) = state.withLock { state -> (Bool, WakeUp<[PusherUpdate]?>) in
            guard !state.finished else { return (false, WakeUp()) }
            // The waiting consumer gets this one update directly: nothing was queued before it.
            let consumer = state.consumer.resumeFirst(returning: [update])
            if consumer.count == 0 { state.pending.append(update) }
            return (true, consumer)
        }
        // Outside our lock (a cancellation handler takes it).
        consumer.resume()
        return accepted
    }

    /// Everything that arrived since the last call, oldest first, waiting while there is nothing;
    /// `nil` once finished and drained, or when the calling task is cancelled. One consumer.
    public func next() async -> [PusherUpdate]? {
        if let ready = take() { return ready }
        // A cancelled consumer ends the batches: the client stops feeding them.
        return await state.wait(
            in: { $1(&$0.consumer) },
            until: { state in
                if !state.pending.isEmpty { return .some(Self.takeAll(&state.pending)) }
                return state.finished ? .some(nil) : nil
            },
            ifCancelled: { state in
                state.finished = true
                return nil
            })
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
        state.withLock { state in
            state.finished = true
            return state.consumer.resumeAll(returning: nil)
        }.resume()
    }
}
