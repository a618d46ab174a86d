import Testing

@testable import BridgeCore

/// `mqtt_to_pusher = "partition"` over ``ClusterSimulation``: a publisher sends `rate` messages per
/// channel per second; the broker gives every message to every connected member (a frozen member's
/// wait in its socket); each member's ``ClusterPartition`` decides, after the membership as it
/// stands at that moment, whether it sends the message, which then reaches Pusher `pipelineDelay`
/// later (a killed member loses what is still in its pipeline; a frozen one sends it when thawed).
/// Records every arrival at Pusher, to count losses, duplicates and reordering per channel.
struct ClusterPartitionSimulation {
    struct Message: Sendable, Equatable {
        var channel: String
        var sequence: Int
    }

    var cluster: ClusterSimulation
    var channels: [String]
    /// Messages per channel per step.
    var perStep = 1
    var pipelineDelay: Duration = .milliseconds(50)
    var partitions: [String: ClusterPartition<Message>] = [:]
    var pipelines: [String: [(message: Message, at: ContinuousClock.Instant)]] = [:]
    var socketWaiting: [String: [Message]] = [:]
    var sent: [String: Int] = [:]
    /// Per channel, the sequences in the order they reached Pusher (duplicates included).
    var arrivals: [String: [Int]] = [:]
    var replayed = 0
    var expired = 0

    init(channels: Int, settings: ClusterSettings = ClusterSettings(group: "factory", instance: "unused")) {
        cluster = ClusterSimulation(settings: settings)
        self.channels = (0..<channels).map { "sensor-\($0)" }
    }

    mutating func start(_ instance: String) {
        cluster.startNode(instance)
        var settings = cluster.settings
        settings.instance = instance
        partitions[instance] = ClusterPartition(settings: settings, standbyLimit: 100_000)
        pipelines[instance] = []
        socketWaiting[instance] = []
    }

    /// SIGKILL: the Will fires; what the member had not sent yet is gone.
    mutating func kill(_ instance: String) {
        cluster.kill(instance)
        pipelines[instance] = []
        socketWaiting[instance] = []
    }

    mutating func freeze(_ instance: String) { cluster.freeze(instance) }

    mutating func thaw(_ instance: String) {
        cluster.thaw(instance)
        let waiting = socketWaiting[instance] ?? []
        socketWaiting[instance] = []
        refreshOwners(instance)
        for message in waiting { take(message, by: instance) }
    }

    /// Runs the cluster and the traffic for `duration`, a step at a time.
    mutating func advance(by duration: Duration) {
        let end = cluster.now + duration
        while cluster.now < end {
            cluster.advance(by: cluster.step)
            for instance in partitions.keys.sorted() where isRunning(instance) { refreshOwners(instance) }
            for _ in 0..<perStep {
                for channel in channels {
                    let message = Message(channel: channel, sequence: sent[channel, default: 0])
                    sent[channel, default: 0] += 1
                    for instance in partitions.keys.sorted() {
                        guard let node = cluster.nodes[instance], !node.dead, node.connected else { continue }
                        if node.frozen {
                            socketWaiting[instance, default: []].append(message)
                        } else {
                            take(message, by: instance)
                        }
                    }
                }
            }
            deliverDue()
        }
    }

    /// Stops the traffic and lets every pipeline empty.
    mutating func drain() {
        let traffic = perStep
        perStep = 0
        advance(by: pipelineDelay + cluster.step * 2)
        perStep = traffic
    }

    private func isRunning(_ instance: String) -> Bool {
        guard let node = cluster.nodes[instance] else { return false }
        return !node.dead && !node.frozen
    }

    private mutating func refreshOwners(_ instance: String) {
        guard let machine = cluster.nodes[instance]?.machine, var partition = partitions[instance] else { return }
        var gone: [Message] = []
        let replay = partition.ownersChanged(to: machine.sendingMembers(now: cluster.now), now: cluster.now, expired: &gone)
        partition.expire(now: cluster.now, into: &gone)
        partitions[instance] = partition
        expired += gone.count
        replayed += replay.count
        for message in replay { pipelines[instance, default: []].append((message, cluster.now + pipelineDelay)) }
    }

    private mutating func take(_ message: Message, by instance: String) {
        guard var partition = partitions[instance] else { return }
        var gone: [Message] = []
        let sends = partition.take(message, channel: message.channel, now: cluster.now, expired: &gone)
        partitions[instance] = partition
        expired += gone.count
        if sends { pipelines[instance, default: []].append((message, cluster.now + pipelineDelay)) }
    }

    private mutating func deliverDue() {
        for instance in pipelines.keys.sorted() where isRunning(instance) {
            let pipeline = pipelines[instance] ?? []
            let due = pipeline.prefix { $0.at <= cluster.now }
            for entry in due { arrivals[entry.message.channel, default: []].append(entry.message.sequence) }
            pipelines[instance] = Array(pipeline.dropFirst(due.count))
        }
    }

    // MARK: the verdict

    /// Sequences sent but never arrived, over all channels.
    var lost: Int {
        channels.reduce(0) { total, channel in
            total + (sent[channel, default: 0] - Set(arrivals[channel, default: []]).count)
        }
    }

    /// Arrivals of a sequence that had arrived already.
    var duplicates: Int {
        channels.reduce(0) { total, channel in
            let all = arrivals[channel, default: []]
            return total + all.count - Set(all).count
        }
    }

    /// First arrivals that came after a later sequence's first arrival.
    var reordered: Int {
        channels.reduce(0) { total, channel in
            var seen: Set<Int> = []
            var highest = -1
            var count = 0
            for sequence in arrivals[channel, default: []] where seen.insert(sequence).inserted {
                if sequence < highest { count += 1 }
                highest = max(highest, sequence)
            }
            return total + count
        }
    }
}
