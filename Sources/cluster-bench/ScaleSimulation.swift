import BridgeCore

/// Many ``ClusterMembership`` machines and one in-memory broker, for a million channels: the
/// shape of Tests/BridgeCoreTests/Cluster/ClusterSimulation.swift (real payloads, retained records,
/// Wills, a manual clock, Pusher confirming each subscription after `confirmDelay`), made to scale —
/// time jumps from deadline to deadline, each message is parsed once for all members, and the
/// coverage (holders per channel, and whether the hashing's owner holds it) is kept up to date
/// per subscription rather than recounted.
final class ScaleSimulation {
    struct Node {
        var machine: ClusterMembership
        var connected = true
        var dead = false
        var confirmed: Set<String> = []
        var subscribed: Set<String> = []
    }

    /// One message as the broker delivers it, parsed once.
    enum Parsed {
        case record(ClusterMemberRecord)
        case recordDeleted(instance: String, will: ClusterWillOrigin?)
        case heartbeat(ClusterHeartbeat)
        case held(ClusterHeldReport)
        case request(ClusterSnapshotRequest)
        case none
    }

    /// What was published, by kind, since ``mark()``.
    struct Traffic {
        var messages: [String: Int] = [:]
        var bytes: [String: Int] = [:]
        var largest = 0
    }

    let settings: ClusterSettings
    var now: ContinuousClock.Instant
    let confirmDelay: Duration = .milliseconds(200)
    var nodes: [String: Node] = [:]
    var order: [String] = []
    var retained: [String: [UInt8]] = [:]
    var queue: [(topic: String, payload: [UInt8], will: ClusterWillOrigin?)] = []
    var confirms: [(at: ContinuousClock.Instant, node: String, channels: [String])] = []
    let wanted: Set<String>
    let names: [String]
    let index: [String: Int]
    /// Per channel: confirmed holders, the hashing's owner among the running members (an index
    /// into `ownerNames`), whether that owner holds it. `bad` counts channels not held exactly once by their owner.
    var holders: [UInt8]
    var owner: [Int16]
    var ownerHolds: [Bool]
    var ownerNames: [String] = []
    var bad: Int
    var traffic = Traffic()
    var incarnations = 0

    init(channels: Int, nameLength: Int) {
        settings = ClusterSettings(group: "bench", instance: "unused")
        now = ContinuousClock.now
        names = (0..<channels).map { number in
            let digits = String(number)
            return "device-" + String(repeating: "0", count: max(0, nameLength - 7 - digits.count)) + digits
        }
        wanted = Set(names)
        var index: [String: Int] = [:]
        index.reserveCapacity(channels)
        for (number, name) in names.enumerated() { index[name] = number }
        self.index = index
        holders = Array(repeating: 0, count: channels)
        owner = Array(repeating: -1, count: channels)
        ownerHolds = Array(repeating: false, count: channels)
        bad = channels
    }

    // MARK: processes

    func start(_ instance: String) {
        incarnations += 1
        var nodeSettings = settings
        nodeSettings.instance = instance
        var machine = ClusterMembership(settings: nodeSettings, incarnation: "inc-\(incarnations)", startedAt: Int64(incarnations))
        machine.heldReportDelay = .milliseconds(50)  // as the supervisor (SupervisedCluster.heldReportDelay)
        _ = machine.channelsWanted(wanted, now: now)
        nodes[instance] = Node(machine: machine)
        order.append(instance)
        apply(instance) { $0.brokerConnected(now: $1) }
        for (topic, payload) in retained.sorted(by: { $0.key < $1.key }) {
            deliver(topic: topic, payload: payload, will: nil, only: instance)
        }
    }

    /// SIGTERM: the machine hands over, then disconnects (no Will).
    func terminate(_ instance: String) { apply(instance) { $0.leaveRequested(now: $1) } }

    /// SIGKILL: the Will deletes the record at once; the process holds nothing from now.
    func kill(_ instance: String) {
        guard let node = nodes[instance] else { return }
        nodes[instance]?.dead = true
        nodes[instance]?.connected = false
        for channel in node.confirmed { unhold(channel, by: instance) }
        nodes[instance]?.confirmed = []
        let will = ClusterWillOrigin(incarnation: node.machine.incarnation, startedAt: node.machine.startedAt)
        publish(topic: settings.memberTopic(instance), payload: [], retain: true, will: will)
    }

    /// The running members: the owners every channel should have.
    var running: [String] { order.filter { nodes[$0]?.dead == false && nodes[$0]?.connected == true } }

    /// Computes each channel's owner among `members` again, and `bad` with it.
    func expectOwners(_ members: [String]) {
        ownerNames = members.sorted()
        let numbers = Dictionary(uniqueKeysWithValues: ownerNames.enumerated().map { ($1, Int16($0)) })
        bad = 0
        for (number, name) in names.enumerated() {
            let expected = numbers[RendezvousHash.owner(of: name, among: ownerNames) ?? ""] ?? -1
            owner[number] = expected
            ownerHolds[number] = expected >= 0 && nodes[ownerNames[Int(expected)]]?.confirmed.contains(name) == true
            if !(holders[number] == 1 && ownerHolds[number]) { bad += 1 }
        }
    }

    // MARK: time

    /// Runs until `condition` holds or `limit` passes; returns whether it held.
    func run(until condition: () -> Bool, limit: Duration) -> Bool {
        let end = now + limit
        while true {
            drain()
            if condition() { return true }
            var next = end
            for name in order { if let node = nodes[name], !node.dead, let due = node.machine.nextDeadline { next = min(next, due) } }
            if let first = confirms.first { next = min(next, first.at) }
            if next >= end, now >= end { return false }
            now = max(now, next)
            while let first = confirms.first, first.at <= now {
                confirms.removeFirst()
                guard nodes[first.node]?.dead == false else { continue }
                for channel in first.channels where nodes[first.node]?.subscribed.contains(channel) == true {
                    if nodes[first.node]?.confirmed.insert(channel).inserted == true { hold(channel, by: first.node) }
                    apply(first.node) { $0.channelSubscribed(channel, now: $1) }
                }
            }
            for name in order {
                guard let node = nodes[name], !node.dead, let due = node.machine.nextDeadline, due <= now else { continue }
                apply(name) { $0.tick(now: $1) }
            }
            if now >= end {
                drain()
                return condition()
            }
        }
    }

    var converged: Bool { bad == 0 }

    func mark() { traffic = Traffic() }

    // MARK: the broker

    private func apply(_ name: String, _ event: (inout ClusterMembership, ContinuousClock.Instant) -> [ClusterAction]) {
        guard var node = nodes[name] else { return }
        nodes[name] = nil  // no copy of the machine's sets while it changes
        let actions = event(&node.machine, now)
        nodes[name] = node
        execute(actions, of: name)
    }

    private func execute(_ actions: [ClusterAction], of name: String) {
        var subscribing: [String] = []
        for action in actions {
            switch action {
            case .publishRecord(let record): publish(topic: settings.memberTopic(name), payload: record.payload, retain: true)
            case .deleteRecord: publish(topic: settings.memberTopic(name), payload: [], retain: true)
            case .publishHeartbeat(let heartbeat): publish(topic: settings.heartbeatTopic(name), payload: heartbeat.payload, retain: false)
            case .publishHeld(let report): publish(topic: settings.heldTopic(name), payload: report.payload, retain: false)
            case .requestSnapshot(let request):
                publish(topic: settings.resyncTopic(request.instance), payload: request.payload, retain: false)
            case .subscribeChannel(let channel):
                nodes[name]?.subscribed.insert(channel)
                subscribing.append(channel)
            case .unsubscribeChannel(let channel):
                nodes[name]?.subscribed.remove(channel)
                if nodes[name]?.confirmed.remove(channel) != nil { unhold(channel, by: name) }
            case .leaveCompleted:
                nodes[name]?.connected = false
                nodes[name]?.dead = true
            case .takingOver, .publishMemberOffline, .holderGone, .report: break
            }
        }
        if !subscribing.isEmpty { confirms.append((now + confirmDelay, name, subscribing)) }
    }

    private func hold(_ channel: String, by name: String) {
        guard let number = index[channel] else { return }
        let wasGood = holders[number] == 1 && ownerHolds[number]
        holders[number] += 1
        if owner[number] >= 0, ownerNames[Int(owner[number])] == name { ownerHolds[number] = true }
        let isGood = holders[number] == 1 && ownerHolds[number]
        bad += (wasGood ? 1 : 0) - (isGood ? 1 : 0)
    }

    private func unhold(_ channel: String, by name: String) {
        guard let number = index[channel] else { return }
        let wasGood = holders[number] == 1 && ownerHolds[number]
        holders[number] -= 1
        if owner[number] >= 0, ownerNames[Int(owner[number])] == name { ownerHolds[number] = false }
        let isGood = holders[number] == 1 && ownerHolds[number]
        bad += (wasGood ? 1 : 0) - (isGood ? 1 : 0)
    }

    private func publish(topic: String, payload: [UInt8], retain: Bool, will: ClusterWillOrigin? = nil) {
        let kind = String(topic.dropFirst(settings.membershipTopic.count + 1).prefix { $0 != "/" })
        traffic.messages[kind, default: 0] += 1
        traffic.bytes[kind, default: 0] += payload.count
        traffic.largest = max(traffic.largest, payload.count)
        if retain { retained[topic] = payload.isEmpty ? nil : payload }
        queue.append((topic, payload, will))
    }

    private func drain() {
        var position = 0
        while position < queue.count {
            let message = queue[position]
            position += 1
            deliver(topic: message.topic, payload: message.payload, will: message.will, only: nil)
            if position > 4096 {
                queue.removeFirst(position)
                position = 0
            }
        }
        queue.removeAll()
    }

    private func deliver(topic: String, payload: [UInt8], will: ClusterWillOrigin?, only: String?) {
        let parsed: Parsed
        switch settings.classify(topic: topic) {
        case .member(let instance)?:
            if payload.isEmpty {
                parsed = .recordDeleted(instance: instance, will: will)
            } else {
                parsed = ClusterMemberRecord(payload: payload, instance: instance).map { .record($0) } ?? .none
            }
        case .heartbeat(let instance)?: parsed = ClusterHeartbeat(payload: payload, instance: instance).map { .heartbeat($0) } ?? .none
        case .held(let instance)?: parsed = ClusterHeldReport(payload: payload, instance: instance).map { .held($0) } ?? .none
        case .resync(let instance)?: parsed = ClusterSnapshotRequest(payload: payload, instance: instance).map { .request($0) } ?? .none
        default: parsed = .none
        }
        for name in only.map({ [$0] }) ?? order {
            guard let node = nodes[name], node.connected, !node.dead else { continue }
            switch parsed {
            case .record(let record): apply(name) { $0.memberRecordReceived(record, now: $1) }
            case .recordDeleted(let instance, let will): apply(name) { $0.memberRecordDeleted(instance: instance, byWillOf: will, now: $1) }
            case .heartbeat(let heartbeat): apply(name) { $0.heartbeatReceived(heartbeat, now: $1) }
            case .held(let report): apply(name) { $0.heldReported(report, now: $1) }
            case .request(let request): apply(name) { $0.snapshotRequested(request, now: $1) }
            case .none: break
            }
        }
    }
}
