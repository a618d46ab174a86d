/// A min-heap of keys ordered by a deadline, earliest first; equal deadlines come out in the order
/// they were pushed. Used by ``RateShaper`` to find the throttle intervals that ended without a
/// scan over every target: push and pop are O(log n), the earliest deadline O(1).
///
/// Pure value type; it holds instants, it never reads a clock.
struct DeadlineQueue<Instant: InstantProtocol, Key: Sendable>: Sendable {
    /// One scheduled key.
    struct Entry: Sendable {
        /// When the key is due.
        var deadline: Instant
        /// Push order, the tie-breaker for equal deadlines.
        var sequence: UInt64
        /// What is due.
        var key: Key
    }

    private var entries: [Entry] = []
    private var pushed: UInt64 = 0

    /// Keys waiting.
    var count: Int { entries.count }

    /// The earliest deadline (nil when empty).
    var earliest: Instant? { entries.first?.deadline }

    /// Schedules `key` at `deadline`.
    mutating func push(_ key: Key, at deadline: Instant) {
        entries.append(Entry(deadline: deadline, sequence: pushed, key: key))
        pushed &+= 1
        siftUp(entries.count - 1)
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popDue(now: Instant) -> Entry? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            siftDown(0)
        }
        return first
    }

    private func precedes(_ lhs: Int, _ rhs: Int) -> Bool {
        let left = entries[lhs]
        let right = entries[rhs]
        if left.deadline != right.deadline { return left.deadline < right.deadline }
        return left.sequence < right.sequence
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(child, parent) else { return }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < entries.count && precedes(left, first) { first = left }
            if right < entries.count && precedes(right, first) { first = right }
            guard first != parent else { return }
            entries.swapAt(parent, first)
            parent = first
        }
    }
}
