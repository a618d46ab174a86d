/// Waiting in a ``WaiterQueue`` kept inside the locked value: the check and the parking under one
/// lock, the cancellation handler and the deadline that remove the waiter. Every queue of the
/// project waits through these two functions (no waiter table, ticket counter or cancellation
/// handler of its own).
///
/// `queue` names the ``WaiterQueue`` in the value by handing it to the closure it gets, e.g.
/// `{ state, body in body(&state.consumers) }`: a key path cannot reach into a non-copyable value.
extension Locked where Value: ~Copyable {
    /// Returns what `ready` finds, checked under the lock; while it finds nothing (`nil`) the task
    /// parks in `queue` until the owner resumes it with a value. An uninterruptible wait: a
    /// cancelled task goes on waiting (for queues whose owner always wakes everyone at the end).
    public func wait<Result: Sendable>(
        in queue: (inout Value, (inout WaiterQueue<Result>) -> Void) -> Void,
        until ready: (inout Value) -> Result?
    ) async -> Result {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
            let now: Result? = withLock { value in
                if let result = ready(&value) { return result }
                queue(&value) { $0.park(continuation, ticket: .next()) }
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// ``wait(in:until:)`` that a cancelled task leaves: it returns what `cancelled` says, run
    /// under the lock when the task is cancelled — whether it was parked then, not parked yet (the
    /// check under the lock sees the cancellation), or resumed already (its side effects, like
    /// closing a queue whose consumer left, happen all the same; its value is ignored then).
    public func wait<Result: Sendable>(
        in queue: @escaping @Sendable (inout Value, (inout WaiterQueue<Result>) -> Void) -> Void,
        until ready: (inout Value) -> Result?,
        ifCancelled cancelled: @escaping @Sendable (inout Value) -> Result
    ) async -> Result {
        await wait(in: queue, deadline: nil, until: ready, ifCancelled: cancelled)
    }

    /// ``wait(in:until:ifCancelled:)`` with a deadline: a task still parked at `deadline` leaves
    /// with what `timedOut` says (run under the lock, also when the task was resumed just before).
    /// The deadline is one timer, not a poll; a deadline that passed before the task parks is seen
    /// by the check under the lock.
    public func wait<Result: Sendable>(
        in queue: @escaping @Sendable (inout Value, (inout WaiterQueue<Result>) -> Void) -> Void,
        deadline: ContinuousClock.Instant,
        until ready: (inout Value) -> Result?,
        ifTimedOut timedOut: @escaping @Sendable (inout Value) -> Result,
        ifCancelled cancelled: @escaping @Sendable (inout Value) -> Result
    ) async -> Result {
        await wait(in: queue, deadline: (deadline, timedOut), until: ready, ifCancelled: cancelled)
    }

    private func wait<Result: Sendable>(
        in queue: @escaping @Sendable (inout Value, (inout WaiterQueue<Result>) -> Void) -> Void,
        deadline: (instant: ContinuousClock.Instant, timedOut: @Sendable (inout Value) -> Result)?,
        until ready: (inout Value) -> Result?,
        ifCancelled cancelled: @escaping @Sendable (inout Value) -> Result
    ) async -> Result {
        let ticket = WaiterQueue<Result>.Ticket.next()
        let timer = deadline.map { deadline in
            Task { [self] in
                do { try await Task.sleep(until: deadline.instant, clock: .continuous) } catch { return }
                leave(queue, ticket, with: deadline.timedOut)
            }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
                let now: Result? = withLock { value in
                    if let result = ready(&value) { return result }
                    if Task.isCancelled { return cancelled(&value) }
                    if let deadline, ContinuousClock.now >= deadline.instant { return deadline.timedOut(&value) }
                    queue(&value) { $0.park(continuation, ticket: ticket) }
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            leave(queue, ticket, with: cancelled)
        }
    }

    /// Takes the waiter of `ticket` out of `queue` (if it is still there) with the value `outcome`
    /// gives, and resumes it once the lock is released.
    private func leave<Result: Sendable>(
        _ queue: (inout Value, (inout WaiterQueue<Result>) -> Void) -> Void, _ ticket: WaiterQueue<Result>.Ticket,
        with outcome: (inout Value) -> Result
    ) {
        let wakeUp = withLock { value in
            let result = outcome(&value)
            var wakeUp = WakeUp<Result>()
            queue(&value) { wakeUp = $0.remove(ticket, returning: result) }
            return wakeUp
        }
        wakeUp.resume()
    }
}
