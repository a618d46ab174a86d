/// Whether MQTT → Pusher delivery of one bridge is paused because Pusher refused the app (HTTP
/// 403: over quota, app disabled; docs/contract.md §7.3), shared by the bridge's lanes. Part of
/// ``BridgeSupervisor``; the lanes' waiting is the runtime's.
///
/// The first lane refused pauses the bridge; every lane then holds its batch and tries it again at
/// the backoff's cap; the first batch Pusher accepts resumes the bridge and wakes every waiting lane
/// at once, so all lanes go on in order. While paused, `/readyz` and STATUS= show ``reason``.
public struct DeliveryPause: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// What a transition means for the log (one line on pause and one on resume, not per retry).
    public enum Transition: Equatable, Sendable {
        /// Nothing changed.
        case none
        /// Delivery was running and is paused now.
        case paused
        /// Delivery was paused, since this long, and runs again: waiting lanes are woken.
        case resumed(after: Duration)
    }

    /// Why delivery is paused, nil while it runs.
    public private(set) var reason: String?
    private var since: Instant?

    public init() {}

    /// Whether delivery is paused.
    public var isPaused: Bool { reason != nil }

    /// Pusher refused a batch with `reason` at `now`; the reason shown is the latest.
    public mutating func refused(reason: String, now: Instant) -> Transition {
        defer { self.reason = reason }
        guard self.reason == nil else { return .none }
        since = now
        return .paused
    }

    /// Pusher accepted a batch at `now`: delivery runs again.
    public mutating func accepted(now: Instant) -> Transition {
        guard reason != nil else { return .none }
        let since = self.since ?? now
        reason = nil
        self.since = nil
        return .resumed(after: since.duration(to: now))
    }
}

/// Turns for requests that must reach an outbox in the order they were decided, while no lock is
/// held across the outbox call: each takes a ticket when decided and appends on its turn.
public struct Turns: Sendable, Equatable {
    private var next: UInt64 = 0
    /// The ticket whose turn it is.
    public private(set) var current: UInt64 = 0

    public init() {}

    /// A new ticket, after every one taken before.
    public mutating func take() -> UInt64 {
        defer { next += 1 }
        return next
    }

    /// The current ticket's holder is done: the next ticket's turn.
    public mutating func done() -> UInt64 {
        current += 1
        return current
    }
}
