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
            for channel in taking {
                if let takeover = takeover(of: channel) { actions.append(.takingOver(channel, takeover)) }
                actions.append(.subscribeChannel(channel))
            }
            actions.append(.report(.channelsTaken(taking)))
            subscribed.formUnion(taking)
        }
        for channel in target where releasing[channel] != nil {
            releasing[channel] = nil
            lingering[channel] = nil
        }
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
                // Kept a little longer: what Pusher sent here before the new holder subscribed
                // may not have been read yet (``ClusterSettings/handoverLinger``).
                if let lingerEnd = lingering[channel] {
                    if lingerEnd <= now { confirmedHandover.append(channel) }
                } else if settings.handoverLinger > .zero {
                    // The handover timeout no longer applies: the channel goes when the linger ends.
                    lingering[channel] = now + settings.handoverLinger
                    releasing[channel] = now + settings.handoverLinger
                } else {
                    confirmedHandover.append(channel)
                }
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
                lingering[channel] = nil
                subscribed.remove(channel)
                confirmed.remove(channel)
            }
        }

        if !orphaned.isEmpty || !handedOverByLeaver.isEmpty {
            orphaned = orphaned.filter { wanted.contains($0.key) }
            handedOverByLeaver.formIntersection(wanted)
        }

        if phase == .leaving, subscribed.isEmpty {
            phase = .left
            actions.append(.leaveCompleted)
        }
        publishHeldIfChanged(into: &actions)
    }

    /// How `channel`, about to be subscribed here, was held before; nil when nobody is known to
    /// have held it (the bridge's own restart record decides). Forgets what it used.
    private mutating func takeover(of channel: String) -> ClusterTakeover? {
        defer {
            orphaned[channel] = nil
            handedOverByLeaver.remove(channel)
        }
        if let lastHeard = orphaned[channel] { return .afterLoss(lastHeard: lastHeard) }
        if handedOverByLeaver.contains(channel) || members.values.contains(where: { $0.confirmedHeld.contains(channel) }) {
            return .handover
        }
        return nil
    }

    /// Remembers that `channels` lost their holder, last heard from at `lastHeard`.
    mutating func orphan(_ channels: Set<String>, lastHeard: ContinuousClock.Instant) {
        for channel in channels {
            if let known = orphaned[channel], known >= lastHeard { continue }
            orphaned[channel] = lastHeard
        }
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
                // Timed out with its record still there: it died (or hangs) with what it held.
                if member.record != nil { orphan(member.confirmedHeld, lastHeard: member.lastHeard ?? now) }
                // What it reported holding is no news of a later life: it must report again.
                member.held = nil
                actions.append(.report(member.record == nil ? .memberLeft(instance: name) : .memberTimedOut(instance: name)))
                died.append(name)
            } else if member.awaitingSettle, let settledAt = member.settledAt, settledAt <= now {
                member.awaitingSettle = false
            }
            // Kept while anything of it is recent: a held report can arrive before its record.
            if member.record == nil, member.liveSince == nil, member.lastHeard.map({ now - $0 >= settings.memberTimeout }) ?? true {
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
