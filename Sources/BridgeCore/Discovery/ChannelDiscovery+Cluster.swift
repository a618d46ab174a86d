/// Discovery in a cluster (docs/contract.md §7.4, "discovery"): each prefix rule is polled by one
/// member, the one the hashing picks; the others skip their polls, and every member learns the
/// channels from that member's retained list.
extension ChannelDiscovery {
    /// Another member runs `rule`'s discovery: the poll due now is not made. The next is due one
    /// `discovery_interval` later (``pollSoon(rule:now:)`` brings it forward when this member
    /// becomes the rule's owner). Held channels are kept as they are.
    public mutating func pollSkipped(rule name: String, now: Instant) {
        guard var state = states[name], state.pollStartedAt != nil else { return }
        state.pollStartedAt = nil
        state.pollAgain = false
        state.nextPoll = now.advanced(by: state.rule.settings.interval)
        states[name] = state
    }

    /// This member now runs `rule`'s discovery: poll at the next deadline, unless a poll is in flight.
    public mutating func pollSoon(rule name: String, now: Instant) {
        guard var state = states[name], state.pollStartedAt == nil else { return }
        state.nextPoll = now
        states[name] = state
    }

    /// Some member of the group reported `channels` subscribed (its held report). A channel held
    /// by discovery counts as confirmed from now: a later poll's count includes the bridge's own
    /// subscription, so a count of 1 means the bridge is alone there (whichever member holds it).
    public mutating func heldByGroup(_ channels: some Sequence<String>, now: Instant) {
        for channel in channels where held[channel] != nil && held[channel]?.confirmedAt == nil {
            held[channel]?.confirmedAt = now
            held[channel]?.lastActivity = now
        }
    }

    /// The member of the group that held `channels` died: no subscription of the group is in them
    /// until a new holder reports them (``heldByGroup(_:now:)``). A poll's count taken meanwhile is
    /// of others only, so a count of 1 (the device) no longer reads as "the bridge alone" (the
    /// fleet bench: after a SIGKILL the rule's poller left 14,000 of the dead member's channels).
    public mutating func heldByGroupLost(_ channels: Set<String>) {
        for channel in channels where held[channel]?.confirmedAt != nil {
            held[channel]?.confirmedAt = nil
        }
    }
}
