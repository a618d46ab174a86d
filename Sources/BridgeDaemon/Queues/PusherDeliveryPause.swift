import BridgeCore
import Locking

/// The MQTT → Pusher lanes' side of the 403 pause (docs/contract.md §7.3): the decisions are the
/// supervisor's (``DeliveryPause``), under the runtime's one lock; this makes a lane wait while
/// delivery is paused — until another lane's batch is accepted, the backoff's cap, or the bridge
/// stops — without polling.
struct PusherDeliveryPause: Sendable {
    let decisions: Locked<RuntimeDecisions>

    /// Why delivery is paused, nil while it runs.
    var reason: String? { decisions.withLock { $0.supervisor.pause.reason } }

    /// Pusher refused a batch with `reason` at `now`; the reason shown is the latest.
    func refused(reason: String, now: ContinuousClock.Instant) -> DeliveryPause.Transition {
        decisions.withLock { $0.supervisor.pause.refused(reason: reason, now: now) }
    }

    /// Pusher accepted a batch at `now`: delivery runs again and waiting lanes are woken.
    func accepted(now: ContinuousClock.Instant) -> DeliveryPause.Transition {
        let (transition, woken) = decisions.withLock { state in
            let transition = state.supervisor.pause.accepted(now: now)
            guard case .resumed = transition else { return (transition, [CheckedContinuation<Void, Never>]()) }
            return (transition, state.pausedLanes.removeAll())
        }
        for lane in woken { lane.resume() }
        return transition
    }

    /// The lanes stop (the bridge stops): every waiting lane is woken, and none waits from now on.
    func wakeAll() {
        let woken = decisions.withLock { state in
            state.pausedLanesReleased = true
            return state.pausedLanes.removeAll()
        }
        for lane in woken { lane.resume() }
    }

    /// Waits up to `limit` (the backoff's cap), less if delivery resumes meanwhile, the task is
    /// cancelled, or ``wakeAll()`` is called. Returns at once when delivery is not paused or
    /// `stop()` is true (looked at when the wait begins and whenever the lane is woken).
    func waitWhilePaused(upTo limit: Duration, stop: () -> Bool = { false }) async {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while decisions.withLock({ $0.supervisor.pause.isPaused && !$0.pausedLanesReleased }), !stop(), !Task.isCancelled,
            ContinuousClock.now < deadline
        {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await Task.sleep(until: deadline) }
                group.addTask { await self.wokenOrResumed() }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Returns when delivery resumes or ``wakeAll()`` is called (at once if it is not paused or
    /// the lanes stopped), or the task is cancelled.
    private func wokenOrResumed() async {
        let id = decisions.withLock { $0.pausedLanes.ticket() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = decisions.withLock { state in
                    guard state.supervisor.pause.isPaused, !state.pausedLanesReleased, !Task.isCancelled else { return false }
                    state.pausedLanes.add(id, continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
        } onCancel: {
            decisions.withLock { $0.pausedLanes.remove(id) }?.resume()
        }
    }
}
