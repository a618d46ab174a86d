import Testing

@testable import BridgeCore

/// Several ``ClusterMembership`` machines exchanging their messages through a small in-memory
/// broker (retained records, Wills, heartbeats, held reports: everything goes through the real
/// payload encoding and `ClusterSettings.classify(topic:)`), with Pusher confirming each
/// subscription after `confirmDelay`. Driven by a manual clock: `advance(by:)` ticks every running
/// node every `step`, never sleeps, and records per channel the longest stretch with no holder
/// and with two or more (docs/contract.md §7.4: "briefly two owners is better than none").
struct ClusterSimulation {
    /// One process: a machine, its broker connection and its Pusher subscriptions.
    struct Node {
        var machine: ClusterMembership
        var connected = false
        /// SIGSTOP: no ticks, messages wait in its socket until thawed.
        var frozen = false
        /// SIGKILL or a finished leave: gone for good.
        var dead = false
        var inbox: [(topic: String, payload: [UInt8], will: ClusterWillOrigin?)] = []
        /// Channels subscribed, and of those the ones Pusher confirmed (the ones that count as held).
        var subscribed: Set<String> = []
        var confirmed: Set<String> = []
        var events: [ClusterEvent] = []
        /// How each channel it took was held before (the last ``ClusterAction/takingOver(_:_:)``).
        var takeovers: [String: ClusterTakeover] = [:]
        var subscribeCount = 0
        var unsubscribeCount = 0
        var leaveCompleted = false
        /// The channels this node was told nobody in the group holds any more (a member died with them).
        var holdersGone: Set<String> = []
    }

    let settings: ClusterSettings
    var now = ContinuousClock().now
    let start: ContinuousClock.Instant
    var step: Duration = .milliseconds(100)
    var confirmDelay: Duration = .milliseconds(200)
    var nodes: [String: Node] = [:]
    var retained: [String: [UInt8]] = [:]
    var pendingConfirms: [(node: String, channel: String, at: ContinuousClock.Instant)] = []
    var offlinePublished: [(by: String, instance: String)] = []
    var wanted: [String] = []
    /// False: the broker sends a connecting member no retained record, as ejabberd 23.01 does for
    /// those published through another of its nodes (docs/brokers.md); live messages still arrive.
    var retainedOnConnect = true
    /// Held messages the broker loses: per sending instance, how many of its next ones.
    var heldLosses: [String: Int] = [:]
    /// Nodes whose own record does not come back to them (a broker still sending a long backlog
    /// first) until ``returnEcho(to:)``: they go on listening after the connect.
    var withheldEchoes: Set<String> = []
    private var echoes: [String: [UInt8]] = [:]
    /// Every membership message published: topic and size.
    var published: [(topic: String, bytes: Int)] = []
    /// Per channel: the longest time with no holder and with more than one, since `resetStatistics()`.
    var longestGap: [String: Duration] = [:]
    var longestDuplicate: [String: Duration] = [:]
    private var uncoveredSince: [String: ContinuousClock.Instant] = [:]
    private var duplicatedSince: [String: ContinuousClock.Instant] = [:]
    private var incarnations = 0

    init(settings: ClusterSettings = ClusterSettings(group: "factory", instance: "unused")) {
        self.settings = settings
        start = now
    }

    // MARK: processes

    /// Starts a process of `instance` under node id `id` (default: the instance) and connects it.
    mutating func startNode(_ instance: String, id: String? = nil, connect: Bool = true) {
        incarnations += 1
        var nodeSettings = settings
        nodeSettings.instance = instance
        var machine = ClusterMembership(settings: nodeSettings, incarnation: "inc-\(incarnations)", startedAt: Int64(incarnations))
        _ = machine.channelsWanted(wanted, now: now)
        let id = id ?? instance
        nodes[id] = Node(machine: machine)
        if connect { self.connect(id) }
    }

    /// The broker accepts `id`'s connection: the machine is told, then the retained records arrive.
    mutating func connect(_ id: String) {
        nodes[id]?.connected = true
        nodes[id]?.frozen = false
        apply(id) { $0.brokerConnected(now: $1) }
        guard retainedOnConnect else { return }
        for (topic, payload) in retained.sorted(by: { $0.key < $1.key }) { deliver(topic: topic, payload: payload, to: id) }
    }

    /// `id` loses the broker; with `will`, the broker publishes its Last Will (the record's deletion).
    mutating func disconnect(_ id: String, will: Bool) {
        guard let node = nodes[id] else { return }
        nodes[id]?.connected = false
        apply(id) { $0.brokerDisconnected(now: $1) }
        if will { publish(topic: settings.memberTopic(node.machine.instance), payload: [], retain: true, willOf: node.machine) }
    }

    /// The broker publishes the Will of an earlier connection of `id` (taken over by the current one).
    mutating func fireStaleWill(of id: String) {
        guard let node = nodes[id] else { return }
        publish(topic: settings.memberTopic(node.machine.instance), payload: [], retain: true, willOf: node.machine)
    }

    /// SIGKILL: the kernel closes the socket, so the Will fires at once. `namingItself`: the Will
    /// carries the process's incarnation (as the daemon's does); without, an anonymous deletion.
    mutating func kill(_ id: String, namingItself: Bool = true) {
        guard let node = nodes[id] else { return }
        nodes[id]?.dead = true
        nodes[id]?.connected = false
        nodes[id]?.subscribed = []
        nodes[id]?.confirmed = []
        publish(topic: settings.memberTopic(node.machine.instance), payload: [], retain: true, willOf: namingItself ? node.machine : nil)
    }

    /// SIGTERM: the machine hands over; `advance` runs it until `leaveCompleted`, then it disconnects gracefully.
    mutating func terminate(_ id: String) {
        apply(id) { $0.leaveRequested(now: $1) }
    }

    mutating func setWanted(_ channels: [String]) {
        wanted = channels
        for id in nodes.keys.sorted() where nodes[id]?.dead == false { apply(id) { [channels] in $0.channelsWanted(channels, now: $1) } }
    }

    // MARK: time

    /// Moves the clock forward in `step`s: Pusher confirmations, ticks, coverage statistics.
    mutating func advance(by duration: Duration) {
        let end = now + duration
        while now < end {
            now = min(now + step, end)
            let due = pendingConfirms.filter { $0.at <= now }
            pendingConfirms.removeAll { $0.at <= now }
            for confirm in due where nodes[confirm.node]?.subscribed.contains(confirm.channel) == true {
                guard let node = nodes[confirm.node], !node.dead else { continue }
                nodes[confirm.node]?.confirmed.insert(confirm.channel)
                if !node.frozen { apply(confirm.node) { $0.channelSubscribed(confirm.channel, now: $1) } }
            }
            for id in nodes.keys.sorted() {
                guard let node = nodes[id], !node.dead, !node.frozen else { continue }
                apply(id) { $0.tick(now: $1) }
            }
            recordCoverage()
        }
    }

    /// Advances until `condition` holds, at most `limit`; a test issue when it never does.
    mutating func advance(
        until condition: (ClusterSimulation) -> Bool, limit: Duration = .seconds(30), _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let end = now + limit
        while now < end {
            if condition(self) { return }
            advance(by: step)
        }
        if !condition(self) { Issue.record(comment ?? "the condition did not hold within \(limit)", sourceLocation: sourceLocation) }
    }

    mutating func resetStatistics() {
        longestGap = [:]
        longestDuplicate = [:]
        uncoveredSince = [:]
        duplicatedSince = [:]
    }

    // MARK: views

    /// The nodes holding `channel` (confirmed, running: a frozen process forwards nothing).
    func holders(of channel: String) -> [String] {
        nodes.keys.sorted().filter { id in
            guard let node = nodes[id], !node.dead, !node.frozen else { return false }
            return node.confirmed.contains(channel)
        }
    }

    /// Every connected, running node active, every wanted channel held by exactly one node, that
    /// node the hashing's choice among them, and nothing else held.
    var isConverged: Bool {
        let running = nodes.values.filter { !$0.dead && !$0.frozen && $0.connected }
        guard running.allSatisfy({ $0.machine.phase == .active }) else { return false }
        let active = running.map(\.machine.instance)
        for channel in wanted {
            let holders = holders(of: channel)
            guard holders.count == 1, let holder = nodes[holders[0]],
                holder.machine.instance == RendezvousHash.owner(of: channel, among: active)
            else { return false }
        }
        return nodes.values.allSatisfy { $0.subscribed.isSubset(of: Set(wanted)) && $0.subscribed == $0.confirmed }
    }

    var maxGap: Duration { longestGap.values.max() ?? .zero }
    var maxDuplicate: Duration { longestDuplicate.values.max() ?? .zero }

    // MARK: the broker

    private mutating func apply(_ id: String, _ event: (inout ClusterMembership, ContinuousClock.Instant) -> [ClusterAction]) {
        guard var machine = nodes[id]?.machine else { return }
        let actions = event(&machine, now)
        nodes[id]?.machine = machine
        execute(actions, of: id)
    }

    private mutating func execute(_ actions: [ClusterAction], of id: String) {
        guard let instance = nodes[id]?.machine.instance else { return }
        for action in actions {
            switch action {
            case .publishRecord(let record):
                publish(topic: settings.memberTopic(instance), payload: record.payload, retain: true)
            case .deleteRecord:
                publish(topic: settings.memberTopic(instance), payload: [], retain: true)
            case .publishHeartbeat(let heartbeat):
                publish(topic: settings.heartbeatTopic(instance), payload: heartbeat.payload, retain: false)
            case .publishHeld(let report):
                if let lost = heldLosses[instance], lost > 0 {
                    heldLosses[instance] = lost - 1
                    continue
                }
                publish(topic: settings.heldTopic(instance), payload: report.payload, retain: false)
            case .requestSnapshot(let request):
                publish(topic: settings.resyncTopic(request.instance), payload: request.payload, retain: false)
            case .takingOver(let channel, let takeover):
                nodes[id]?.takeovers[channel] = takeover
            case .subscribeChannel(let channel):
                nodes[id]?.subscribed.insert(channel)
                nodes[id]?.subscribeCount += 1
                pendingConfirms.append((id, channel, now + confirmDelay))
            case .unsubscribeChannel(let channel):
                nodes[id]?.subscribed.remove(channel)
                nodes[id]?.confirmed.remove(channel)
                nodes[id]?.unsubscribeCount += 1
            case .holderGone(let channels):
                nodes[id]?.holdersGone.formUnion(channels)
            case .publishMemberOffline(let member):
                offlinePublished.append((instance, member))
            case .leaveCompleted:
                // The executor publishes its own `offline` and disconnects gracefully: no Will.
                nodes[id]?.leaveCompleted = true
                nodes[id]?.connected = false
                nodes[id]?.dead = true
            case .report(let event):
                nodes[id]?.events.append(event)
            }
        }
    }

    /// `willOf`: the broker publishes this as the Last Will of that machine's process, which names
    /// it in user properties (SupervisedCluster.willUserProperties).
    private mutating func publish(topic: String, payload: [UInt8], retain: Bool, willOf: ClusterMembership? = nil) {
        published.append((topic, payload.count))
        if retain {
            if payload.isEmpty { retained[topic] = nil } else { retained[topic] = payload }
        }
        let will = willOf.map { ClusterWillOrigin(incarnation: $0.incarnation, startedAt: $0.startedAt) }
        for id in nodes.keys.sorted() where nodes[id]?.connected == true && nodes[id]?.dead == false {
            deliver(topic: topic, payload: payload, will: will, to: id)
        }
    }

    private mutating func deliver(topic: String, payload: [UInt8], will: ClusterWillOrigin? = nil, to id: String) {
        guard let node = nodes[id] else { return }
        if node.frozen {
            nodes[id]?.inbox.append((topic, payload, will))
            return
        }
        switch settings.classify(topic: topic) {
        case .member(let instance)?:
            if withheldEchoes.contains(id), instance == node.machine.instance, !payload.isEmpty {
                echoes[id] = payload
                return
            }
            if payload.isEmpty {
                apply(id) { $0.memberRecordDeleted(instance: instance, byWillOf: will, now: $1) }
            } else if let record = ClusterMemberRecord(payload: payload, instance: instance) {
                apply(id) { $0.memberRecordReceived(record, now: $1) }
            }
        case .heartbeat(let instance)?:
            if let heartbeat = ClusterHeartbeat(payload: payload, instance: instance) {
                apply(id) { $0.heartbeatReceived(heartbeat, now: $1) }
            }
        case .held(let instance)?:
            if let report = ClusterHeldReport(payload: payload, instance: instance) {
                apply(id) { $0.heldReported(report, now: $1) }
            }
        case .resync(let instance)?:
            if let request = ClusterSnapshotRequest(payload: payload, instance: instance) {
                apply(id) { $0.snapshotRequested(request, now: $1) }
            }
        case .discovered?, .discoveredPart?:
            break  // the simulation runs no discovery
        case nil:
            Issue.record("a message on \(topic), outside the membership topic")
        }
    }

    /// The broker is through `id`'s backlog: its own record comes back at last.
    mutating func returnEcho(to id: String) {
        withheldEchoes.remove(id)
        if let payload = echoes.removeValue(forKey: id) {
            deliver(topic: settings.memberTopic(nodes[id]!.machine.instance), payload: payload, to: id)
        }
    }

    /// SIGSTOP.
    mutating func freeze(_ id: String) { nodes[id]?.frozen = true }

    /// SIGCONT: the first tick comes before the waiting messages (the worst order for the machine).
    mutating func thaw(_ id: String) {
        nodes[id]?.frozen = false
        apply(id) { $0.tick(now: $1) }
        let inbox = nodes[id]?.inbox ?? []
        nodes[id]?.inbox = []
        for message in inbox { deliver(topic: message.topic, payload: message.payload, will: message.will, to: id) }
    }

    private mutating func recordCoverage() {
        for channel in wanted {
            let count = holders(of: channel).count
            track(count == 0, channel, since: &uncoveredSince, longest: &longestGap)
            track(count > 1, channel, since: &duplicatedSince, longest: &longestDuplicate)
        }
    }

    private func track(
        _ condition: Bool, _ channel: String, since: inout [String: ContinuousClock.Instant], longest: inout [String: Duration]
    ) {
        if condition {
            let began = since[channel] ?? (now - step)
            since[channel] = began
            longest[channel] = max(longest[channel] ?? .zero, now - began)
        } else {
            since[channel] = nil
        }
    }
}
