@testable import BridgeCore

/// The fuzz target for the cluster membership messages (docs/contract.md §7.4): what any client
/// of the broker could publish under the membership topic, read by every member.
enum ClusterTargets {
    static let settings = ClusterSettings(group: "fuzz", instance: "a")

    /// Lines = messages: `TOPIC-SUFFIX<TAB>PAYLOAD` (the suffix goes after `<membership_topic>/`).
    /// Each is classified, parsed as its kind and fed to a member that wants three channels, with
    /// the clock advancing 400 ms a line. Checks: a topic that classifies rebuilds to itself; a
    /// parsed record, heartbeat, held report or discovered list re-encodes to one that parses
    /// equal; the member never holds a channel nobody wants; it has a phase it can be in.
    static func messages(_ input: Input) -> Int32 {
        var member = ClusterMembership(settings: settings, incarnation: "fuzz-self", startedAt: 0)
        var now = ContinuousClock.Instant.now
        let wanted = ["ch-1", "ch-2", "ch-3"]
        _ = member.brokerConnected(now: now)
        _ = member.channelsWanted(wanted, now: now)
        for line in input.text.split(separator: "\n", omittingEmptySubsequences: false) {
            now = now + .milliseconds(400)
            let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            let topic = settings.membershipTopic + "/" + String(parts[0])
            let payload = Array((parts.count > 1 ? parts[1] : "").utf8)
            feed(topic: topic, payload: payload, to: &member, now: now)
            _ = member.tick(now: now)
            for channel in member.heldChannels where !wanted.contains(channel) { violated("holds unwanted \(channel)") }
        }
        _ = member.leaveRequested(now: now)
        _ = member.tick(now: now + .seconds(10))
        if !member.heldChannels.isEmpty, member.phase == .left { violated("left while holding channels") }
        return 0
    }

    private static func feed(topic: String, payload: [UInt8], to member: inout ClusterMembership, now: ContinuousClock.Instant) {
        guard let kind = settings.classify(topic: topic) else { return }
        switch kind {
        case .member(let instance):
            if settings.memberTopic(instance) != topic { violated("member topic does not rebuild: \(topic)") }
            if payload.isEmpty {
                _ = member.memberRecordDeleted(instance: instance, now: now)
            } else if let record = ClusterMemberRecord(payload: payload, instance: instance) {
                if ClusterMemberRecord(payload: record.payload, instance: instance) != record { violated("record round trip") }
                _ = member.memberRecordReceived(record, now: now)
            }
        case .heartbeat(let instance):
            if settings.heartbeatTopic(instance) != topic { violated("heartbeat topic does not rebuild: \(topic)") }
            guard let heartbeat = ClusterHeartbeat(payload: payload, instance: instance) else { return }
            if ClusterHeartbeat(payload: heartbeat.payload, instance: instance) != heartbeat { violated("heartbeat round trip") }
            _ = member.heartbeatReceived(heartbeat, now: now)
        case .held(let instance):
            if settings.heldTopic(instance) != topic { violated("held topic does not rebuild: \(topic)") }
            guard let report = ClusterHeldReport(payload: payload, instance: instance) else { return }
            if ClusterHeldReport(payload: report.payload, instance: instance) != report { violated("held report round trip") }
            _ = member.heldReported(report, now: now)
        case .discovered(let rule):
            if settings.discoveredTopic(rule: rule) != topic { violated("discovered topic does not rebuild: \(topic)") }
            guard let list = ClusterDiscoveredList(payload: payload, rule: rule) else { return }
            if ClusterDiscoveredList(payload: list.payload, rule: rule) != list { violated("discovered list round trip") }
        case .discoveredPart(let rule, let part):
            if settings.discoveredTopic(rule: rule, part: part) != topic { violated("discovered part topic does not rebuild: \(topic)") }
            guard let list = ClusterDiscoveredList(payload: payload, rule: rule, part: part) else { return }
            if ClusterDiscoveredList(payload: list.payload, rule: rule, part: part) != list { violated("discovered part round trip") }
        case .resync(let instance):
            if settings.resyncTopic(instance) != topic { violated("resync topic does not rebuild: \(topic)") }
            guard let request = ClusterSnapshotRequest(payload: payload, instance: instance) else { return }
            if ClusterSnapshotRequest(payload: request.payload, instance: instance) != request { violated("resync round trip") }
            _ = member.snapshotRequested(request, now: now)
        }
    }
}
