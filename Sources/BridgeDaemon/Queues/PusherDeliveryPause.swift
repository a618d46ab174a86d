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
            guard case .resumed = transition else { return (transition, WakeUp<Void>()) }
            return (transition, state.pausedLanes.resumeAll(returning: ()))
        }
        woken.resume()
        return transition
    }

    /// The lanes stop (the bridge stops): every waiting lane is woken, and none waits from now on.
    func wakeAll() {
        decisions.withLock { state in
            state.pausedLanesReleased = true
            return state.pausedLanes.resumeAll(returning: ())
        }.resume()
    }

    /// Waits up to `limit` (the backoff's cap), less if delivery resumes meanwhile, the task is
    /// cancelled, or ``wakeAll()`` is called. Returns at once when delivery is not paused or
    /// `stop()` is true (looked at when the wait begins and whenever the lane is woken).
    func waitWhilePaused(upTo limit: Duration, stop: () -> Bool = { false }) async {
        let deadline = ContinuousClock.now.advanced(by: limit)
        func paused(_ state: RuntimeDecisions) -> Bool { state.supervisor.pause.isPaused && !state.pausedLanesReleased }
        while !stop(), !Task.isCancelled, ContinuousClock.now < deadline, decisions.withLock({ paused($0) }) {
            await decisions.wait(
                in: { state, queue in queue(&state.pausedLanes) }, deadline: deadline,
                until: { paused($0) ? nil : () }, ifTimedOut: { _ in () }, ifCancelled: { _ in () })
        }
    }
}
