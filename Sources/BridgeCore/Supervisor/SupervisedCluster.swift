import MQTTVocabulary

/// The cluster state of one bridge (docs/contract.md §7.4): BridgeCore's ``ClusterMembership``
/// decides who holds which channel; this holds it with what the member feeds it — the channels
/// the configuration names and the group's discovered channels — and the held report waiting
/// to be published. Part of ``BridgeSupervisor``.
public struct SupervisedCluster: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// How long a held report waits for the next change before it is published: reports are
    /// coalesced, so taking 3,000 channels sends a few messages, not 3,000 (``ClusterMembership/heldReportDelay``).
    public static let heldReportDelay = Duration.milliseconds(50)

    public let settings: ClusterSettings
    /// `status_topic` as configured: a member's status is `<status_topic>/<instance>`.
    let statusTopicBase: String
    /// The bridge's own status topic (`online` goes there again after a stall).
    let statusTopic: String
    /// The user property on everything members of this group publish from Pusher.
    public let marker: MQTTUserProperty
    public internal(set) var membership: ClusterMembership
    /// Channels the configuration names (the bridge machine's subscribe and unsubscribe).
    var configured: Set<String> = []
    /// The discovery rules of the configuration: lists of other rules are ignored.
    var discoveryRules: Set<String>
    /// The group's discovered channels per rule: the retained lists on the broker (the last complete one).
    var discovered: [String: Set<String>] = [:]
    /// The parts of each rule's retained list received (``ClusterDiscoveredList``).
    var discoveredParts: [String: ClusterDiscoveredAssembly] = [:]
    /// What this member's own discovery holds per rule (meaningful where it is the owner).
    var localDiscovered: [String: Set<String>] = [:]
    /// The rules this member polls: owner, and polled at least once since it became owner, so
    /// its list is worth publishing (an owner that has not polled yet would publish nothing).
    var polledAsOwner: Set<String> = []
    /// The rules this member owned at the last check.
    var ownedRules: Set<String> = []
    /// Whether ``configured`` or ``discovered`` changed since the membership last heard of them.
    var wantedChanged = false
    /// Set by the membership's `leaveCompleted`.
    public internal(set) var leaveCompleted = false
    /// Limits the log lines of unreadable membership messages.
    var badMessageLog = RateLimitedLog<Instant>(perMinute: 6)
    /// `mqtt_to_pusher = "partition"`: which MQTT → Pusher events this member sends, and those it
    /// keeps (BridgeSupervisor+Partition.swift); nil with shared subscriptions.
    var partition: ClusterPartition<PartitionedEvent>?
    /// Kept events whose channel became this member's, to go out before the next routed ones.
    var replay: [PartitionedEvent] = []

    init(settings: ClusterSettings, bridge: BridgeSettings, incarnation: String, startedAt: Int64) {
        self.settings = settings
        statusTopicBase = bridge.mqtt.statusTopic
        statusTopic = bridge.effectiveStatusTopic
        marker = MQTTUserProperty("pusher-mqtt-bridge-cluster", settings.group)
        membership = ClusterMembership(settings: settings, incarnation: incarnation, startedAt: startedAt)
        membership.clientID = bridge.effectiveMQTTClientID
        membership.heldReportDelay = Self.heldReportDelay
        discoveryRules = Set(bridge.discoveryRules.map(\.name))
        if settings.mqttToPusher == .partition {
            partition = ClusterPartition(settings: settings, standbyLimit: bridge.buffer.maxMessages)
        }
    }

    /// Every channel the group must hold.
    var wanted: Set<String> {
        var all = configured
        for rule in discoveryRules { all.formUnion(discovered[rule] ?? []) }
        return all
    }

    /// The Will's user properties: which process's record it deletes (`incarnation`, `started_at`),
    /// so that a member that receives the deletion of its own record from another process's Will
    /// knows a second process uses its instance and client id.
    public var willUserProperties: [MQTTUserProperty] {
        [MQTTUserProperty("incarnation", membership.incarnation), MQTTUserProperty("started_at", String(membership.startedAt))]
    }

    /// The membership publish for `action`, or nil when it is none.
    func publish(for action: ClusterAction) -> MQTTPublish? {
        switch action {
        case .publishRecord(let record):
            return MQTTPublish(rule: "", topic: settings.memberTopic(settings.instance), payload: record.payload, qos: 1, retain: true)
        case .deleteRecord:
            return MQTTPublish(rule: "", topic: settings.memberTopic(settings.instance), payload: [], qos: 1, retain: true)
        case .publishHeartbeat(let heartbeat):
            return MQTTPublish(
                rule: "", topic: settings.heartbeatTopic(settings.instance), payload: heartbeat.payload, qos: 0, retain: false)
        case .publishMemberOffline(let instance):
            return MQTTPublish(rule: "", topic: "\(statusTopicBase)/\(instance)", payload: Array("offline".utf8), qos: 1, retain: true)
        case .publishHeld(let report):
            return MQTTPublish(rule: "", topic: settings.heldTopic(settings.instance), payload: report.payload, qos: 1, retain: false)
        case .requestSnapshot(let request):
            return MQTTPublish(rule: "", topic: settings.resyncTopic(request.instance), payload: request.payload, qos: 1, retain: false)
        case .takingOver, .subscribeChannel, .unsubscribeChannel, .holderGone, .leaveCompleted, .report:
            return nil
        }
    }
}

/// The cluster's events (docs/contract.md §7.4) and its side of discovery ("discovery").
extension BridgeSupervisor {
    /// Runs `event` on the membership and turns its actions into the supervisor's; then rules this
    /// member has just come to own are polled at once, and the gauges follow.
    ///
    /// The membership is changed in place (`cluster!.membership`), and no copy of ``cluster`` is held
    /// across a change anywhere in the supervisor: a copy makes the change copy the membership's
    /// sets, O(channels) per event — with 20,000 channels a member, one per subscription confirmed,
    /// heartbeat and held report, which stalled members past `member_timeout` (the 5 × 100,000
    /// fleet bench, Benchmarks/fleet/bench_fleet_cluster.py).
    mutating func clusterEvent(_ now: Now, _ event: (inout ClusterMembership) -> [ClusterAction]) -> [Action] {
        guard cluster != nil else { return [] }
        let clusterActions = event(&cluster!.membership)
        var actions: [Action] = []
        for action in clusterActions {
            if let publish = cluster!.publish(for: action) {
                actions.append(.publishMembership(publish))
                continue
            }
            switch action {
            case .takingOver(let channel, .handover):
                actions.append(.channelTakenOver(channel, lastHeldAt: nil))
            case .takingOver(let channel, .afterLoss(let lastHeard)):
                // Dated on the wall clock: as long before now as the monotonic clock says.
                let ago = now.instant - lastHeard
                let millis = ago.components.seconds * 1000 + ago.components.attoseconds / 1_000_000_000_000_000
                actions.append(.channelTakenOver(channel, lastHeldAt: UTCTimestamp(millisecondsSince1970: now.millis - millis)))
            case .subscribeChannel(let channel):
                actions.append(.subscribeChannel(channel))
            case .unsubscribeChannel(let channel):
                actions.append(.unsubscribeChannel(channel))
                actions += lift(bridge.channelReleased(channel, receivedAtMillis: now.millis), now, settle: false)
            case .holderGone(let channels):
                discovery.heldByGroupLost(channels)
            case .leaveCompleted:
                self.cluster?.leaveCompleted = true
                actions.append(.leaveCompleted)
            case .report(let event):
                actions.append(.clusterReport(event))
                // A survivor may have written `offline` for this member meanwhile.
                if case .stalled = event { actions.append(.bridge(.publishStatus(topic: cluster!.statusTopic, payload: "online"))) }
            case .publishRecord, .deleteRecord, .publishHeartbeat, .publishMemberOffline, .publishHeld, .requestSnapshot:
                break  // published above
            }
        }
        // Also without actions: the end of the observation changes who owns the discovery rules.
        checkDiscoveryOwnership(now)
        if let membership = self.cluster?.membership {
            actions.append(.clusterGauges(members: membership.owningMembers(now: now.instant).count, held: membership.heldChannels.count))
        }
        actions += partitionOwnersChecked(now)
        return actions
    }

    /// Tells the membership the channels the group wants, when they changed.
    mutating func settleCluster(_ now: Now) -> [Action] {
        guard cluster?.wantedChanged == true else { return [] }
        cluster!.wantedChanged = false
        let wanted = cluster!.wanted
        return clusterEvent(now) { $0.channelsWanted(wanted, now: now.instant) }
    }

    /// Whether a message from the broker is the cluster's (an echo of a member's publish, or under
    /// the membership topic) rather than the rules'.
    public func isClusterMessage(topic: String, userProperties: [MQTTUserProperty]) -> Bool {
        guard let cluster else { return false }
        return userProperties.contains(cluster.marker) || topic.hasPrefix(cluster.settings.membershipTopic + "/")
    }

    /// A message ``isClusterMessage(topic:userProperties:)`` took: an echo (published by a member
    /// of this group, whichever member it came back to: §5.4), or a membership message.
    public mutating func clusterMessageReceived(topic: String, payload: [UInt8], userProperties: [MQTTUserProperty], _ now: Now)
        -> [Action]
    {
        guard let marker = cluster?.marker, let settings = cluster?.settings else { return [] }
        if userProperties.contains(marker) { return [.clusterEchoSuppressed] }
        switch settings.classify(topic: topic) {
        case .member(let instance):
            if payload.isEmpty {
                // A Will names the process whose record it deletes (SupervisedCluster.willUserProperties).
                let will = userProperties.first { $0.name == "incarnation" }.map { incarnation in
                    ClusterWillOrigin(
                        incarnation: incarnation.value,
                        startedAt: userProperties.first { $0.name == "started_at" }.flatMap { Int64($0.value) } ?? 0)
                }
                return clusterEvent(now) { $0.memberRecordDeleted(instance: instance, byWillOf: will, now: now.instant) }
            }
            guard let record = ClusterMemberRecord(payload: payload, instance: instance) else {
                return clusterBadMessage(topic: topic, bytes: payload.count, now)
            }
            return clusterEvent(now) { $0.memberRecordReceived(record, now: now.instant) }
        case .heartbeat(let instance):
            guard let heartbeat = ClusterHeartbeat(payload: payload, instance: instance) else {
                return clusterBadMessage(topic: topic, bytes: payload.count, now)
            }
            return clusterEvent(now) { $0.heartbeatReceived(heartbeat, now: now.instant) }
        case .held(let instance):
            guard let report = ClusterHeldReport(payload: payload, instance: instance) else {
                return clusterBadMessage(topic: topic, bytes: payload.count, now)
            }
            let actions = clusterEvent(now) { $0.heldReported(report, now: now.instant) }
            // Discovery's "alone" test needs to know the bridge is subscribed, whichever member holds the channel.
            discovery.heldByGroup(report.listedChannels, now: now.instant)
            return actions
        case .resync(let instance):
            guard let request = ClusterSnapshotRequest(payload: payload, instance: instance) else {
                return clusterBadMessage(topic: topic, bytes: payload.count, now)
            }
            return clusterEvent(now) { $0.snapshotRequested(request, now: now.instant) }
        case .discovered(let rule):
            return discoveredPartReceived(rule: rule, part: 0, payload: payload, topic: topic, now)
        case .discoveredPart(let rule, let part):
            return discoveredPartReceived(rule: rule, part: part, payload: payload, topic: topic, now)
        case nil:
            return []  // another level under the membership topic: not ours, and not for the rules either
        }
    }

    /// An unreadable membership message: counted, logged at most six times a minute.
    private mutating func clusterBadMessage(topic: String, bytes: Int, _ now: Now) -> [Action] {
        let (log, suppressed) = cluster?.badMessageLog.allow(now: now.instant) ?? (false, 0)
        return [.clusterBadMessage(topic: topic, bytes: bytes, suppressedLogs: log ? suppressed : nil)]
    }

    /// A part of a rule's retained list arrived (zero-length: deleted): when the list is complete
    /// and differs from the one before, the group's list changed.
    private mutating func discoveredPartReceived(rule: String, part: Int, payload: [UInt8], topic: String, _ now: Now) -> [Action] {
        var list: ClusterDiscoveredList?
        if !payload.isEmpty {
            guard let parsed = ClusterDiscoveredList(payload: payload, rule: rule, part: part) else {
                return clusterBadMessage(topic: topic, bytes: payload.count, now)
            }
            list = parsed
        }
        guard cluster != nil else { return [] }
        cluster!.discoveredParts[rule, default: ClusterDiscoveredAssembly()].received(part: part, list)
        guard let list = cluster!.discoveredParts[rule]?.takeNewList() else { return [] }
        let channels = Set(list)
        guard channels != cluster!.discovered[rule] ?? [] else { return [] }
        return discoveredListReceived(rule: rule, channels: channels, now)
    }

    /// The group's list for a discovery rule changed: the wanted channels follow, and presence rooms
    /// get (or lose) their mirror on every member, so whichever member holds a room mirrors it.
    private mutating func discoveredListReceived(rule: String, channels: Set<String>, _ now: Now) -> [Action] {
        guard cluster?.discoveryRules.contains(rule) == true else { return [] }
        let before = cluster!.discovered.updateValue(channels, forKey: rule) ?? []
        cluster!.wantedChanged = true
        var actions: [Action] = []
        if Self.isPresence(rule) {
            for channel in channels.subtracting(before).sorted() {
                actions += lift(bridge.discoveredRoomJoined(channel, receivedAtMillis: now.millis), now, settle: false)
            }
            for channel in before.subtracting(channels).sorted() {
                actions += lift(bridge.discoveredRoomLeft(channel, receivedAtMillis: now.millis), now, settle: false)
            }
        }
        actions += settleCluster(now)
        return actions
    }

    /// Another process uses this member's MQTT client id: it gives way (nothing without a cluster).
    public mutating func sessionTakenOver(_ now: Now) -> [Action] {
        clusterEvent(now) { $0.sessionTakenOver(now: now.instant) }
    }

    /// SIGTERM in a cluster: the record goes first, then every channel is handed over; ``Action/leaveCompleted``
    /// (at once, or from a later event or tick) says it is done.
    public mutating func leaveRequested(_ now: Now) -> [Action] {
        clusterEvent(now) { $0.leaveRequested(now: now.instant) }
    }

    /// The `socket_id` an MQTT → Pusher event for `channel` goes out with: the holder's when another
    /// member holds the channel, else `own`.
    public func socketID(for channel: String, own: String?, now: Instant) -> String? {
        cluster?.membership.holderSocketID(of: channel, now: now) ?? own
    }

    /// `cluster factory, member a of 3 (a, b, c), holds 17 channels`, nil without a cluster.
    public func clusterSummary(now: Instant) -> String? {
        guard let cluster else { return nil }
        let members = cluster.membership.owningMembers(now: now)
        let names = members.isEmpty ? "none" : members.joined(separator: ", ")
        return "cluster \(cluster.settings.group), member \(cluster.settings.instance) of \(members.count) (\(names)), "
            + "holds \(cluster.membership.heldChannels.count) channels"
    }

    // MARK: Discovery in a cluster

    /// Rules this member has just come to own are polled at once, not at their next interval.
    mutating func checkDiscoveryOwnership(_ now: Now) {
        guard let cluster, !cluster.discoveryRules.isEmpty else { return }
        let owned = Set(cluster.discoveryRules.filter { cluster.membership.isDiscoveryOwner(rule: $0, now: now.instant) })
        let gained = owned.subtracting(cluster.ownedRules).sorted()
        self.cluster?.ownedRules = owned
        self.cluster?.polledAsOwner.formIntersection(owned)
        for rule in gained { discovery.pollSoon(rule: rule, now: now.instant) }
    }

    /// This member's discovered lists that differ from the group's, for the rules it owns and has polled.
    mutating func publishDiscovered(_ now: Now) -> [Action] {
        guard let cluster else { return [] }
        var actions: [Action] = []
        for rule in cluster.polledAsOwner.sorted() {
            guard cluster.membership.isDiscoveryOwner(rule: rule, now: now.instant) else {
                self.cluster?.polledAsOwner.remove(rule)
                continue
            }
            let local = cluster.localDiscovered[rule] ?? []
            guard local != cluster.discovered[rule] ?? [] else { continue }
            // Parts 1… before the head, which makes them count; then the parts a longer list used.
            let parts = ClusterDiscoveredList.parts(rule: rule, channels: local)
            for list in parts.dropFirst() + parts.prefix(1) {
                let topic = cluster.settings.discoveredTopic(rule: rule, part: list.part)
                actions.append(.publishMembership(MQTTPublish(rule: "", topic: topic, payload: list.payload, qos: 1, retain: true)))
            }
            for part in cluster.discoveredParts[rule]?.surplusParts(keeping: parts.count) ?? [] {
                let topic = cluster.settings.discoveredTopic(rule: rule, part: part)
                actions.append(.publishMembership(MQTTPublish(rule: "", topic: topic, payload: [], qos: 1, retain: true)))
            }
        }
        return actions
    }
}
