/// The events of ``ClusterMembership``: what the broker, Pusher, the clock and the operator tell it.
extension ClusterMembership {
    /// The MQTT connection is up (the executor has subscribed `membershipFilter`, without
    /// `no_local`, retained messages sent): publish the record and a first heartbeat, then listen.
    public mutating func brokerConnected(now: ContinuousClock.Instant) -> [ClusterAction] {
        switch phase {
        case .leaving, .left, .observing, .active: return []
        case .disconnected: break
        }
        guard gaveWay == nil else { return [] }
        phase = .observing(until: now + observation)
        lastTick = now
        var actions: [ClusterAction] = [.publishRecord(ownRecord)]
        ownRecordCurrent = true
        awaitingOwnRecord = true
        heartbeatWait = nil
        actions.append(heartbeat(now: now))
        reconcile(now: now, into: &actions)
        return actions
    }

    /// The MQTT connection is gone: this member can no longer see the membership, so it releases
    /// every channel (docs/contract.md §7.4, "failover"). Leaving, it has left.
    public mutating func brokerDisconnected(now: ContinuousClock.Instant) -> [ClusterAction] {
        var actions: [ClusterAction] = []
        releaseAll(into: &actions)
        nextHeartbeat = nil
        switch phase {
        case .leaving:
            phase = .left
            actions.append(.leaveCompleted)
        case .left: break
        case .disconnected, .observing, .active: phase = .disconnected
        }
        reconcile(now: now, into: &actions)
        return actions
    }

    /// A retained record arrived on `<membership_topic>/members/<record.instance>`.
    public mutating func memberRecordReceived(_ record: ClusterMemberRecord, now: ContinuousClock.Instant) -> [ClusterAction] {
        if record.instance == instance {
            guard record.incarnation != incarnation else {
                ownRecordCurrent = true
                guard awaitingOwnRecord else { return [] }
                // Everything the broker had for this member when it connected is read, the others'
                // records included. A member counts another as live only with a heartbeat, and
                // those sent while it read its backlog come behind the echo: for others known by
                // their record alone, it waits up to one observation more (the fleet bench: on the
                // echo alone, a member with a long backlog knew every record but no heartbeat, and
                // took everything). With all of them live, the observation ends as the clock says.
                awaitingOwnRecord = false
                heartbeatWait = recordedNotLive ? now + observation : nil
                guard case .observing(let until) = phase, observationEnd(until) <= now else { return [] }
                phase = .active
                var actions: [ClusterAction] = []
                reconcile(now: now, into: &actions)
                return actions
            }
            if let clientID, record.clientID == clientID, (record.startedAt, record.incarnation) > (startedAt, incarnation) {
                // A process started after this one writes this instance's record: with the same file
                // it also has the same MQTT client id, and the two would take the session from each
                // other in turn. The older one gives way (the newer one is what the operator started last).
                return giveWay(to: record.incarnation, clientIDShared: true, now: now)
            }
            // An earlier incarnation's record: ours goes back at the next heartbeat.
            ownRecordCurrent = false
            return []
        }
        var member = members[record.instance] ?? RemoteMember()
        if member.record?.incarnation != record.incarnation {
            // A member new to this one (or a new process of it): held reports are not retained, so
            // this member's goes out again for it to know who holds what before it takes any
            // (a handover is no gap: ClusterTakeover). So does this member's record, at the next
            // heartbeat: a broker that serves a retained message only from the node it was
            // published on (ejabberd 23.01, docs/brokers.md) did not send it to a newcomer on
            // another node, which would take this member for dead and hold its channels too.
            resetHeldReports()
            ownRecordCurrent = false
            if member.held?.incarnation != record.incarnation { member.held = nil }
            releaseCheckNeeded = true
        }
        member.record = record
        member.lastHeard = now
        members[record.instance] = member
        var actions: [ClusterAction] = []
        reconcile(now: now, into: &actions)
        return actions
    }

    /// A zero-length retained message arrived on `<membership_topic>/members/<instance>`: that
    /// member left, or its Will fired. For this member's own topic (a late Will of an earlier
    /// session, a duplicate leaving), the record goes back at the next heartbeat.
    ///
    /// `will`: the process whose Will this was, when the message says (a member's Will carries its
    /// incarnation and start). A Will of a *newer* process under this member's own instance means
    /// it took this member's MQTT session (the same file on another host): this one gives way.
    public mutating func memberRecordDeleted(
        instance deleted: String, byWillOf will: ClusterWillOrigin? = nil, now: ContinuousClock.Instant
    ) -> [ClusterAction] {
        if deleted == instance {
            if let will, will.incarnation != incarnation, (will.startedAt, will.incarnation) > (startedAt, incarnation) {
                return giveWay(to: will.incarnation, clientIDShared: true, now: now)
            }
            ownRecordCurrent = false
            return []
        }
        guard let member = members[deleted] else { return [] }
        // What it held: a Will means it died with them (a gap since it was last heard from); a
        // deletion of its own means it leaves on SIGTERM and keeps them until they are taken.
        var actions: [ClusterAction] = []
        if will != nil {
            if let gone = orphan(member.lastKnownHeld, lastHeard: member.lastHeard ?? now) { actions.append(gone) }
        } else {
            handedOverByLeaver.formUnion(member.lastKnownHeld)
        }
        releaseCheckNeeded = true
        members[deleted]?.record = nil
        members[deleted]?.held = nil
        reconcile(now: now, into: &actions)
        return actions
    }

    /// A heartbeat arrived. One under this member's own name with another incarnation means a
    /// second live process uses the name.
    public mutating func heartbeatReceived(_ heartbeat: ClusterHeartbeat, now: ContinuousClock.Instant) -> [ClusterAction] {
        var actions: [ClusterAction] = []
        if heartbeat.instance == instance {
            guard heartbeat.incarnation != incarnation else { return [] }
            if duplicateUntil == nil { actions.append(.report(.duplicateInstance(otherIncarnation: heartbeat.incarnation))) }
            duplicateUntil = now + settings.memberTimeout
            duplicateIncarnation = heartbeat.incarnation
            return actions
        }
        members[heartbeat.instance, default: RemoteMember()].lastHeartbeat = now
        members[heartbeat.instance]?.lastHeard = now
        members[heartbeat.instance]?.observing = heartbeat.observing
        heldSequenceClaimed(by: heartbeat, now: now, into: &actions)
        reconcile(now: now, into: &actions)
        return actions
    }

    /// The channels the bridge wants held by someone in the group: configured and discovered.
    public mutating func channelsWanted(_ channels: some Sequence<String>, now: ContinuousClock.Instant) -> [ClusterAction] {
        channelsWanted(Set(channels), now: now)
    }

    /// The channels the bridge wants held by someone in the group (a set: shared, not copied).
    public mutating func channelsWanted(_ channels: Set<String>, now: ContinuousClock.Instant) -> [ClusterAction] {
        wanted = channels
        wantedRevision += 1
        releaseCheckNeeded = true
        if !orphaned.isEmpty || !handedOverByLeaver.isEmpty {
            orphaned = orphaned.filter { wanted.contains($0.key) }
            handedOverByLeaver.formIntersection(wanted)
        }
        var actions: [ClusterAction] = []
        reconcile(now: now, into: &actions)
        return actions
    }

    /// Pusher confirmed the subscription of a channel this member asked for.
    public mutating func channelSubscribed(_ channel: String, now: ContinuousClock.Instant) -> [ClusterAction] {
        guard subscribed.contains(channel), confirmed.insert(channel).inserted else { return [] }
        // Only the held report follows: who owns what and who is live did not change (a whole
        // reconcile per confirmation cost 20,000 of them per member at a start with 1,000,000
        // channels; what else is due waits for the next tick, at ``nextDeadline``).
        var actions: [ClusterAction] = []
        publishHeldIfDue(now: now, into: &actions)
        return actions
    }

    /// The Pusher connection is up with `socketID` (nil: it went down). The held report carries it,
    /// so it is sent again when it changes.
    public mutating func pusherConnectionChanged(socketID: String?, now: ContinuousClock.Instant) -> [ClusterAction] {
        guard socketID != pusherSocketID else { return [] }
        pusherSocketID = socketID
        var actions: [ClusterAction] = []
        reconcile(now: now, into: &actions)
        return actions
    }

    /// The broker closed this member's connection because another process connected with the same
    /// MQTT client id — the same instance name in the same file, on another host: MQTT 5 reason
    /// "Session taken over", or the MQTT client's takeover pattern (connections lost right after
    /// their CONNACK, again and again; mosquitto sends no reason). Two processes cannot share one
    /// session: they would take it from each other in turn and neither would hold a channel. This
    /// one gives way; it stays a non-member, its ``readinessProblem`` says why, until the operator
    /// gives each process its own instance and restarts it.
    public mutating func sessionTakenOver(now: ContinuousClock.Instant) -> [ClusterAction] {
        giveWay(to: nil, clientIDShared: true, now: now)
    }

    /// Leaves the broker for good because another process uses this instance (and its client id).
    private mutating func giveWay(to other: String?, clientIDShared: Bool, now: ContinuousClock.Instant) -> [ClusterAction] {
        guard gaveWay == nil else { return [] }
        gaveWay =
            "cluster instance \(instance) is also used by another live process"
            + (other.map { " (incarnation \($0))" } ?? "")
            + " with the same MQTT client id" + (clientID.map { " \($0)" } ?? "")
            + ", which takes this one's session; this process gave way and stays "
            + "away from the broker: give each member its own instance"
        var actions: [ClusterAction] = [.report(.gaveWay(otherIncarnation: other))]
        actions += brokerDisconnected(now: now)
        return actions
    }

    /// SIGTERM: withdraw the membership first, hand every channel over (each until its new holder
    /// reports it, at most `handover_timeout`), then ``ClusterAction/leaveCompleted``.
    public mutating func leaveRequested(now: ContinuousClock.Instant) -> [ClusterAction] {
        var actions: [ClusterAction] = []
        switch phase {
        case .leaving, .left: return []
        case .disconnected:
            phase = .left
            return [.leaveCompleted]
        case .observing, .active:
            phase = .leaving
            nextHeartbeat = nil
            actions.append(.deleteRecord)
        }
        reconcile(now: now, into: &actions)
        return actions
    }

    /// Time passed: heartbeats, timeouts, settles, handover deadlines, the end of observation.
    public mutating func tick(now: ContinuousClock.Instant) -> [ClusterAction] {
        var actions: [ClusterAction] = []
        if let last = lastTick, now - last > settings.memberTimeout, phase == .active || phase == .leaving {
            // Frozen longer than the others wait: they have taken this member's channels already.
            actions.append(.report(.stalled(for: now - last)))
            releaseAll(into: &actions)
            if phase == .active { phase = .observing(until: now + observation) }
        }
        lastTick = now
        if let until = duplicateUntil, until <= now {
            duplicateUntil = nil
            duplicateIncarnation = nil
            actions.append(.report(.duplicateInstanceCleared))
        }
        if case .observing(let until) = phase, observationEnd(until) <= now { phase = .active }
        if let due = nextHeartbeat, due <= now {
            if !ownRecordCurrent {
                actions.append(.publishRecord(ownRecord))
                ownRecordCurrent = true
            }
            actions.append(heartbeat(now: now))
        }
        reconcile(now: now, into: &actions)
        return actions
    }

    /// This member's record.
    var ownRecord: ClusterMemberRecord {
        ClusterMemberRecord(instance: instance, incarnation: incarnation, startedAt: startedAt, clientID: clientID)
    }

    /// The next heartbeat, scheduled one interval later.
    mutating func heartbeat(now: ContinuousClock.Instant) -> ClusterAction {
        heartbeatSequence += 1
        nextHeartbeat = now + settings.heartbeatInterval
        countHeartbeatForSnapshot()
        return .publishHeartbeat(
            ClusterHeartbeat(
                instance: instance, incarnation: incarnation, sequence: heartbeatSequence, heldSequence: heldSequence,
                observing: phase != .active))
    }

    /// Drops every channel at once (broker lost, frozen).
    mutating func releaseAll(into actions: inout [ClusterAction]) {
        if !subscribed.isEmpty {
            actions.append(contentsOf: subscribed.sorted().map { .unsubscribeChannel($0) })
            actions.append(.report(.releasedAll(count: subscribed.count)))
        }
        subscribed = []
        confirmed = []
        releasing = [:]
        releaseDeadline = nil
        lingering = [:]
        ownershipDirty = true
        resetHeldReports()
    }
}
