import Locking

/// Whether MQTT → Pusher delivery of one bridge is paused because Pusher refused the app (HTTP
/// 403: over quota, app disabled; docs/contract.md §7.3), shared by the bridge's lanes.
///
/// The first lane refused pauses the bridge; every lane then holds its batch and tries it again at
/// the backoff's cap; the first batch Pusher accepts resumes the bridge and wakes every waiting lane
/// at once, so all lanes go on in order. While paused, `/readyz` and STATUS= show ``reason``.
final class PusherDeliveryPause: Sendable {
    /// What a transition means for the log (one line on pause and one on resume, not per retry).
    enum Transition: Equatable, Sendable {
        /// Nothing changed.
        case none
        /// Delivery was running and is paused now.
        case paused
        /// Delivery was paused, since this long, and runs again.
        case resumed(after: Duration)
    }

    private struct State {
        var reason: String?
        var since: ContinuousClock.Instant?
        /// Counts resumptions: a waiting lane sees it change and stops waiting.
        var resumptions: UInt64 = 0
    }

    private let state = Locked(State())
    /// How often a waiting lane looks whether another lane's batch resumed delivery.
    let checkInterval: Duration

    /// Delivery running; waiting lanes check every `checkInterval` whether it resumed.
    init(checkInterval: Duration = .milliseconds(100)) { self.checkInterval = checkInterval }

    /// Why delivery is paused, nil while it runs.
    var reason: String? { state.withLock { $0.reason } }

    /// Pusher refused a batch with `reason` at `now`; the reason shown is the latest.
    func refused(reason: String, now: ContinuousClock.Instant) -> Transition {
        state.withLock { state in
            defer { state.reason = reason }
            guard state.reason == nil else { return .none }
            state.since = now
            return .paused
        }
    }

    /// Pusher accepted a batch at `now`: delivery runs again and waiting lanes are woken.
    func accepted(now: ContinuousClock.Instant) -> Transition {
        state.withLock { state in
            guard state.reason != nil else { return .none }
            let since = state.since ?? now
            state.reason = nil
            state.since = nil
            state.resumptions &+= 1
            return .resumed(after: since.duration(to: now))
        }
    }

    /// Waits up to `limit` (the backoff's cap), less if delivery resumes meanwhile, `stop()` turns
    /// true, or the task is cancelled. Returns at once when delivery is not paused.
    func waitWhilePaused(upTo limit: Duration, stop: () -> Bool = { false }) async {
        let (paused, start) = state.withLock { ($0.reason != nil, $0.resumptions) }
        guard paused else { return }
        let deadline = ContinuousClock.now.advanced(by: limit)
        while !Task.isCancelled && !stop() {
            let now = ContinuousClock.now
            if now >= deadline { return }
            try? await Task.sleep(for: min(checkInterval, now.duration(to: deadline)))
            if state.withLock({ $0.resumptions != start }) { return }
        }
    }
}
