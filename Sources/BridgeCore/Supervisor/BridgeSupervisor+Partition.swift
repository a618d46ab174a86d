/// An MQTT → Pusher event as the partition keeps it: what the outbox would have received.
public struct PartitionedEvent: Sendable, Equatable {
    public var event: PusherEventPublish
    public var receivedAtMillis: Int64

    public init(event: PusherEventPublish, receivedAtMillis: Int64) {
        self.event = event
        self.receivedAtMillis = receivedAtMillis
    }
}

/// `[bridge.cluster] mqtt_to_pusher = "partition"` (docs/contract.md §8.4, ``ClusterPartition``):
/// the routed MQTT → Pusher events pass through here before the outbox. An event whose channel
/// another member owns is kept; when the owners change, the kept events of the channels that became
/// this member's go out first. The runtime routes, filters and appends from one task (its MQTT
/// consumer), so that a replay never overtakes, or is overtaken by, a newer event of its channel.
extension BridgeSupervisor {
    /// Filters the MQTT → Pusher events among `actions` (the bridge machine's, from routing or a
    /// `throttle` release): the replay due first (unless `takingReplay` is false: the caller does
    /// not append in order with the routing), then the events this member sends; a kept event
    /// leaves the list, and those the standby window let go are counted `elsewhere`. Without a
    /// partition, nothing changes.
    public mutating func partitionMQTTToPusher(_ actions: inout [BridgeAction], now: Instant, takingReplay: Bool = true) {
        // The partition is changed in place (`cluster!.partition!`): a local copy would make every
        // change copy the kept events (up to `max_messages`) once per burst.
        guard cluster?.partition != nil else { return }
        var expired: [PartitionedEvent] = []
        var out: [BridgeAction] = []
        out.reserveCapacity(actions.count + (cluster?.replay.count ?? 0))
        if takingReplay {
            for kept in cluster?.replay ?? [] {
                out.append(.enqueueToPusher(kept.event, receivedAtMillis: kept.receivedAtMillis))
            }
            cluster?.replay.removeAll()
        }
        for action in actions {
            guard case .enqueueToPusher(let event, let millis) = action else {
                out.append(action)
                continue
            }
            let item = PartitionedEvent(event: event, receivedAtMillis: millis)
            if cluster!.partition!.take(item, channel: event.channel, now: now, expired: &expired) { out.append(action) }
        }
        Self.countElsewhere(expired, into: &out)
        actions = out
    }

    /// The events the partition holds (kept, and waiting to be replayed): part of `buffered` in the
    /// counter identity (docs/contract.md §7.6).
    public var partitionHeld: Int { (cluster?.partition?.keptCount ?? 0) + (cluster?.replay.count ?? 0) }

    /// After a membership event (heartbeats make one at least every `heartbeat_interval`): the owners
    /// as the membership sees them now; the kept events of channels that became this member's join
    /// the replay. Returns the `elsewhere` counts of the events whose window passed.
    mutating func partitionOwnersChecked(_ now: Now) -> [Action] {
        guard cluster?.partition != nil, let senders = cluster?.membership.sendingMembers(now: now.instant) else { return [] }
        var expired: [PartitionedEvent] = []
        cluster!.partition!.expire(now: now.instant, into: &expired)
        let replayed = cluster!.partition!.ownersChanged(to: senders, now: now.instant, expired: &expired)
        cluster?.replay += replayed
        var counts: [BridgeAction] = []
        Self.countElsewhere(expired, into: &counts)
        return counts.map { .bridge($0) }
    }

    /// `messages_total{outcome="elsewhere"}` for `expired`, one count per rule.
    private static func countElsewhere(_ expired: [PartitionedEvent], into actions: inout [BridgeAction]) {
        guard !expired.isEmpty else { return }
        var perRule: [String: Int] = [:]
        for item in expired { perRule[item.event.rule, default: 0] += 1 }
        for (rule, count) in perRule.sorted(by: { $0.key < $1.key }) {
            actions.append(.count(rule: rule, direction: .mqttToPusher, outcome: .elsewhere, by: count))
        }
    }
}
