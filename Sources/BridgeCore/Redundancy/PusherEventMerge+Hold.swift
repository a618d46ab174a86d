import DequeModule

/// The join hold (docs/pusher-merge.md, "Order after a join"): the first copies of a connection
/// that has just become live beside an established one wait for that one's copies, so that an
/// event the established connection has not delivered yet (its task ran late) does not go out
/// after a later one the new connection delivered first.
extension PusherEventMerge {
    /// The channels whose held events are to be published now, in the order they were released,
    /// since the last call; each channel's held events go out whole, in the order they were held.
    public mutating func takeReleased() -> [String] {
        defer { released = [] }
        return released
    }

    /// Entries held in `channel` now.
    public func heldCount(on channel: String) -> Int { channels[channel]?.heldCount ?? 0 }

    /// Ends the channel's hold at its deadline.
    mutating func releaseIfDue(_ state: inout Channel, now: Instant) {
        guard let deadline = state.holdDeadline, now >= deadline, state.heldCount > 0 else { return }
        counters.heldReleasedByTime &+= UInt64(state.heldCount)
        release(&state)
    }

    /// Every held entry of the channel is published now (the caller is told by ``takeReleased()``),
    /// and no connection there is on probation any more.
    mutating func release(_ state: inout Channel) {
        guard state.heldCount > 0 else { return }
        for index in state.log.indices where state.log[index].held { state.log[index].held = false }
        counters.published &+= UInt64(state.heldCount)
        state.heldCount = 0
        state.holdDeadline = nil
        for index in state.cursors.indices { state.cursors[index]?.probationEnds = nil }
        released.append(state.name)
    }
}
