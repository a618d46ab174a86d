/// Liveness and ownership: after every event, ``ClusterMembership`` brings what it knows of the
/// members up to date and moves channels to match.
extension ClusterMembership {
    /// Updates liveness, then subscribes what this member owns and hands over what it no longer owns.
    ///
    /// With a million channels the work is kept to what changed: the owned channels are hashed
    /// again only when the owning members or the wanted channels change, and the channels being
    /// handed over are looked at only when a held set, the ownership or a deadline says so.
    mutating func reconcile(now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        updateLiveness(now: now, into: &actions)
        let owning = owningMembers(now: now)
        updateTarget(owning: owning)
        var releasingChanged = false
        if ownershipDirty {
            ownershipDirty = false
            releaseCheckNeeded = true
            let taking = target.subtracting(subscribed).sorted()
            if !taking.isEmpty {
                for channel in taking {
                    if let takeover = takeover(of: channel) { actions.append(.takingOver(channel, takeover)) }
                    actions.append(.subscribeChannel(channel))
                }
                actions.append(.report(.channelsTaken(taking)))
                subscribed.formUnion(taking)
            }
            for channel in Array(releasing.keys) where target.contains(channel) {
                releasing[channel] = nil
                lingering[channel] = nil
            }
            for channel in subscribed where !target.contains(channel) {
                let newOwner = RendezvousHash.owner(of: channel, among: owning)
                if var release = releasing[channel] {
                    release.newOwner = newOwner
                    releasing[channel] = release
                } else {
                    releasing[channel] = Release(deadline: now + settings.handoverTimeout, newOwner: newOwner)
                }
            }
            releasingChanged = true
        }
        if releaseCheckNeeded || releaseDeadline.map({ $0 <= now }) ?? false {
            releaseCheckNeeded = false
            releasingChanged = checkReleases(now: now, into: &actions) || releasingChanged
        }
        if releasingChanged { releaseDeadline = releasing.values.lazy.map(\.deadline).min() }

        if phase == .leaving, subscribed.isEmpty {
            phase = .left
            actions.append(.leaveCompleted)
        }
        publishHeldIfDue(now: now, into: &actions)
    }

    /// Computes the channels this member owns again when what they depend on changed.
    private mutating func updateTarget(owning: [String]) {
        let active = phase == .active
        if let key = targetKey, key.active == active, key.owning == owning, key.wantedRevision == wantedRevision { return }
        targetKey = (active, owning, wantedRevision)
        let others = owning.filter { $0 != instance }
        let me = instance
        target = active && owning.contains(me) ? wanted.filter { RendezvousHash.isOwner(me, of: $0, against: others) } : []
        ownershipDirty = true
    }

    /// Drops the channels handed over whose new holder now lists them (after the linger), whose
    /// deadline passed, or that nobody wants. Returns whether ``releasing`` changed.
    private mutating func checkReleases(now: ContinuousClock.Instant, into actions: inout [ClusterAction]) -> Bool {
        var confirmedHandover: [String] = []
        var unconfirmedHandover: [String] = []
        var dropped: [String] = []
        var changed = false
        for (channel, release) in releasing {
            if !wanted.contains(channel) {
                dropped.append(channel)
                continue
            }
            guard let newOwner = release.newOwner else {
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
                    let end = now + settings.handoverLinger
                    lingering[channel] = end
                    releasing[channel] = Release(deadline: end, newOwner: newOwner)
                    changed = true
                } else {
                    confirmedHandover.append(channel)
                }
            } else if release.deadline <= now {
                if phase != .leaving, let owner = members[newOwner], owner.observing, owner.liveSince != nil {
                    // The new owner still listens after its connect (its heartbeat says so) and
                    // holds nothing yet: dropping the channel now would leave it unheld until it
                    // takes it. The handover timeout runs again from now.
                    releasing[channel] = Release(deadline: now + settings.handoverTimeout, newOwner: newOwner)
                    changed = true
                } else {
                    unconfirmedHandover.append(channel)
                }
            }
        }
        let released: [(channels: [String], event: ClusterEvent)] = [
            (confirmedHandover.sorted(), .channelsHandedOver(confirmedHandover.sorted(), confirmed: true)),
            (unconfirmedHandover.sorted(), .channelsHandedOver(unconfirmedHandover.sorted(), confirmed: false)),
            (dropped.sorted(), .channelsDropped(dropped.sorted())),
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
            changed = true
        }
        return changed
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

    /// Remembers that `channels` lost their holder, last heard from at `lastHeard`; returns what
    /// discovery must know: those of them this member does not hold are held by nobody now.
    mutating func orphan(_ channels: Set<String>, lastHeard: ContinuousClock.Instant) -> ClusterAction? {
        for channel in channels {
            if let known = orphaned[channel], known >= lastHeard { continue }
            orphaned[channel] = lastHeard
        }
        let gone = channels.subtracting(confirmed)
        return gone.isEmpty ? nil : .holderGone(gone)
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
                if member.record != nil, let gone = orphan(member.lastKnownHeld, lastHeard: member.lastHeard ?? now) {
                    actions.append(gone)
                }
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
}
