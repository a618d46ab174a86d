/// Held sets between members (docs/contract.md §7.4, "held reports"): this member's own, sent as
/// snapshots and deltas (``ClusterHeldReport``), and the others', read into a ``ClusterHeldView`` each.
extension ClusterMembership {
    // MARK: the others'

    /// A member reported the channels it is subscribed to: one snapshot part or one delta.
    public mutating func heldReported(_ report: ClusterHeldReport, now: ContinuousClock.Instant) -> [ClusterAction] {
        guard report.instance != instance else { return [] }
        // Taken out of the dictionary while it changes: a copy left there would make the held
        // set copied whole for every delta.
        var member = members.removeValue(forKey: report.instance) ?? RemoteMember()
        member.lastHeard = now
        // Only the current process's messages count (a late one of an earlier process is ignored);
        // before its record arrives, the latest incarnation heard of.
        if let record = member.record, record.incarnation != report.incarnation {
            members[report.instance] = member
            return []
        }
        if member.held?.incarnation != report.incarnation { member.held = ClusterHeldView(incarnation: report.incarnation) }
        let outcome = member.held?.apply(report)
        members[report.instance] = member
        var actions: [ClusterAction] = []
        switch outcome {
        case .applied:
            releaseCheckNeeded = true
            if member.record?.incarnation == report.incarnation {
                // Someone holds these: whatever this member knew of their last holder is history.
                for channel in report.listedChannels {
                    orphaned[channel] = nil
                    handedOverByLeaver.remove(channel)
                }
            }
        case .gap: askForSnapshot(of: report.instance, now: now, into: &actions)
        case .duplicate, nil: break
        }
        reconcile(now: now, into: &actions)
        return actions
    }

    /// A heartbeat of another member said which held message it sent last: a snapshot is asked
    /// for when one was lost.
    mutating func heldSequenceClaimed(by heartbeat: ClusterHeartbeat, now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        guard var member = members[heartbeat.instance] else { return }
        if let record = member.record, record.incarnation != heartbeat.incarnation { return }
        if member.held?.incarnation != heartbeat.incarnation { member.held = ClusterHeldView(incarnation: heartbeat.incarnation) }
        members[heartbeat.instance] = nil  // no second reference to the held set while it changes
        let unknown = member.held?.heartbeat(heldSequence: heartbeat.heldSequence) ?? false
        members[heartbeat.instance] = member
        if unknown { askForSnapshot(of: heartbeat.instance, now: now, into: &actions) }
    }

    /// Asks `name` for a snapshot, at most once a heartbeat interval, once its record says which process to ask.
    private mutating func askForSnapshot(of name: String, now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        guard phase != .disconnected, phase != .left, let member = members[name], let record = member.record,
            member.held?.incarnation == record.incarnation
        else { return }
        if let asked = member.snapshotAskedAt, now - asked < settings.heartbeatInterval { return }
        members[name]?.snapshotAskedAt = now
        actions.append(
            .requestSnapshot(ClusterSnapshotRequest(instance: name, incarnation: record.incarnation, from: instance)))
    }

    // MARK: this member's

    /// Another member asks for this member's snapshot (it lost a message): one goes out, at most
    /// one a heartbeat interval for all such requests.
    public mutating func snapshotRequested(_ request: ClusterSnapshotRequest, now: ContinuousClock.Instant) -> [ClusterAction] {
        guard request.instance == instance, request.incarnation == incarnation, askedSnapshotDue == nil else { return [] }
        askedSnapshotDue = max(now, (lastSnapshotAt ?? now) + settings.heartbeatInterval)
        var actions: [ClusterAction] = []
        reconcile(now: now, into: &actions)
        return actions
    }

    /// Sends what changed in the confirmed channels (or the `socket_id`) since the last message,
    /// ``heldReportDelay`` after the first change; a full snapshot when one is needed (after a
    /// (re)connect or a release, for a member new to this one, when asked, every
    /// ``snapshotHeartbeats`` heartbeats) or when the delta would be longer.
    mutating func publishHeldIfDue(now: ContinuousClock.Instant, into actions: inout [ClusterAction]) {
        guard phase != .disconnected, phase != .left else {
            heldDue = nil
            askedSnapshotDue = nil
            return
        }
        if let asked = askedSnapshotDue, asked <= now {
            askedSnapshotDue = nil
            snapshotNeeded = true
            heldDue = min(heldDue ?? now, now)
        }
        if heldDue == nil, snapshotNeeded || heldDirty || pusherSocketID != reportedSocketID { heldDue = now + heldReportDelay }
        guard let due = heldDue, due <= now else { return }
        heldDue = nil
        heldDirty = false
        var messages: [ClusterHeldReport] = []
        if !snapshotNeeded {
            let added = confirmed.subtracting(reportedHeld)
            let removed = reportedHeld.subtracting(confirmed)
            if added.isEmpty, removed.isEmpty, pusherSocketID == reportedSocketID { return }
            if added.count + removed.count <= confirmed.count {
                messages = ClusterHeldReport.messages(
                    instance: instance, incarnation: incarnation, socketID: pusherSocketID, firstSequence: heldSequence + 1,
                    added: added, removed: removed)
            }
        }
        if messages.isEmpty {
            messages = ClusterHeldReport.messages(
                instance: instance, incarnation: incarnation, socketID: pusherSocketID, firstSequence: heldSequence + 1,
                snapshot: confirmed)
            snapshotNeeded = false
            lastSnapshotAt = now
            heartbeatsSinceSnapshot = 0
        }
        heldSequence += UInt64(messages.count)
        reportedHeld = confirmed
        reportedSocketID = pusherSocketID
        actions.append(contentsOf: messages.map { .publishHeld($0) })
    }

    /// Counts a heartbeat toward the periodic snapshot.
    mutating func countHeartbeatForSnapshot() {
        heartbeatsSinceSnapshot += 1
        if heartbeatsSinceSnapshot >= Self.snapshotHeartbeats { snapshotNeeded = true }
    }

    /// Forgets what the others know of this member's held set: the next message is a full snapshot.
    mutating func resetHeldReports() {
        snapshotNeeded = true
        reportedHeld = []
    }
}
