/// Liveness and ownership: after every event, ``ClusterMembership`` brings what it knows of the
/// members up to date and moves channels to match.
extension ClusterMembership {
    /// Updates liveness, then subscribes what this member owns and hands over what it no longer owns.
    mutating func reconcile(now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        updateLiveness(now: now, into: &actions)
        let owning = owningMembers(now: now)
        let target: Set<String> = phase == .active ? wanted.filter { RendezvousHash.owner(of: $0, among: owning) == instance } : []

        let taking = target.subtracting(subscribed).sorted()
        if !taking.isEmpty {
            actions.append(contentsOf: taking.map { .subscribeChannel($0) })
            actions.append(.report(.channelsTaken(taking)))
            subscribed.formUnion(taking)
        }
        for channel in target where releasing[channel] != nil { releasing[channel] = nil }
        for channel in subscribed.subtracting(target) where releasing[channel] == nil {
            releasing[channel] = now + settings.handoverTimeout
        }

        var confirmedHandover: [String] = []
        var unconfirmedHandover: [String] = []
        var dropped: [String] = []
        for (channel, deadline) in releasing.sorted(by: { $0.key < $1.key }) {
            if !wanted.contains(channel) {
                dropped.append(channel)
                continue
            }
            guard let newOwner = RendezvousHash.owner(of: channel, among: owning) else {
                unconfirmedHandover.append(channel)  // nobody to wait for
                continue
            }
            if members[newOwner]?.confirmedHeld.contains(channel) == true {
                confirmedHandover.append(channel)
            } else if deadline <= now {
                unconfirmedHandover.append(channel)
            }
        }
        let released: [(channels: [String], event: ClusterEvent)] = [
            (confirmedHandover, .channelsHandedOver(confirmedHandover, confirmed: true)),
            (unconfirmedHandover, .channelsHandedOver(unconfirmedHandover, confirmed: false)), (dropped, .channelsDropped(dropped)),
        ]
        for (channels, event) in released where !channels.isEmpty {
            actions.append(contentsOf: channels.map { .unsubscribeChannel($0) })
            actions.append(.report(event))
            for channel in channels {
                releasing[channel] = nil
                subscribed.remove(channel)
                confirmed.remove(channel)
            }
        }

        if phase == .leaving, subscribed.isEmpty {
            phase = .left
            actions.append(.leaveCompleted)
        }
        publishHeldIfChanged(into: &actions)
    }

    /// Marks members live or dead from their records and heartbeats, with the events and the
    /// `offline` status a dead member needs.
    private mutating func updateLiveness(now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        var died: [String] = []
        for name in members.keys.sorted() {
            guard var member = members[name] else { continue }
            let heartbeatRecent = member.lastHeartbeat.map { now - $0 < settings.memberTimeout } ?? false
            let live = member.record != nil && heartbeatRecent
            if live, member.liveSince == nil {
                member.liveSince = now
                // Members found while this one is not yet active count at once: they were there first.
                let settle = phase == .active ? settings.joinSettle : .zero
                member.settledAt = now + settle
                member.awaitingSettle = settle > .zero
                actions.append(.report(.memberJoined(instance: name)))
            } else if !live, member.liveSince != nil {
                member.liveSince = nil
                member.settledAt = nil
                member.awaitingSettle = false
                // What it reported holding is no news of a later life: it must report again.
                member.held = nil
                actions.append(.report(member.record == nil ? .memberLeft(instance: name) : .memberTimedOut(instance: name)))
                died.append(name)
            } else if member.awaitingSettle, let settledAt = member.settledAt, settledAt <= now {
                member.awaitingSettle = false
            }
            if member.record == nil, member.liveSince == nil, member.lastHeartbeat.map({ now - $0 >= settings.memberTimeout }) ?? true {
                members[name] = nil  // forgotten: nothing left to know
            } else {
                members[name] = member
            }
        }
        guard phase == .active else { return }
        let survivors = owningMembers(now: now)
        for name in died where RendezvousHash.owner(of: RendezvousHash.statusKey(instance: name), among: survivors) == instance {
            actions.append(.publishMemberOffline(instance: name))
        }
    }

    /// Sends the held report when the confirmed channels changed since the last one.
    private mutating func publishHeldIfChanged(into actions: inout [ClusterAction]) {
        guard phase != .disconnected, phase != .left else { return }
        let held = confirmed.intersection(subscribed).sorted()
        // After a (re)connect or a release the first report goes out even when empty: it replaces
        // whatever the others still believe this member holds.
        guard held != lastHeld || pusherSocketID != lastHeldSocketID else { return }
        lastHeld = held
        lastHeldSocketID = pusherSocketID
        actions.append(
            .publishHeld(ClusterHeldReport(instance: instance, incarnation: incarnation, channels: held, socketID: pusherSocketID)))
    }
}
