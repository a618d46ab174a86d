/// When the client's timer must be woken before the deadline it sleeps until.
///
/// The timer sleeps exactly until the machine's ``PusherConnectionStateMachine/nextDeadline``
/// (no fixed-interval wake-ups). An event that brings the deadline *earlier* — or sets one while
/// the timer had none — must wake it so it sleeps until the new one. A deadline that moves
/// *later* does not: every received frame pushes the activity deadline back, and waking the
/// timer per frame would cost more than the one early wake-up it saves; the timer wakes at the
/// old deadline, the machine finds nothing due, and the timer sleeps until the new one.
/// Pure: the I/O owner keeps it under its lock with the machine.
struct DeadlineTimer: Sendable, Equatable {
    /// The deadline the timer sleeps until (`nil`: until woken).
    private(set) var armedFor: ContinuousClock.Instant?

    /// A timer that sleeps until woken.
    init() {}

    /// The timer goes to sleep until `deadline` (`nil`: until woken).
    mutating func armed(for deadline: ContinuousClock.Instant?) {
        armedFor = deadline
    }

    /// An event left the machine's next deadline at `deadline`: `true` when the timer must be
    /// woken to sleep until it instead.
    mutating func deadlineChanged(to deadline: ContinuousClock.Instant?) -> Bool {
        guard let deadline else { return false }
        if let armedFor, armedFor <= deadline { return false }
        armedFor = deadline
        return true
    }
}
