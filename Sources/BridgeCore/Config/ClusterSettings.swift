/// `[bridge.cluster]` (docs/contract.md §7.4): several daemons with the same file share one bridge's
/// work, coordinating through the broker. Topics and timings are described in
/// docs/architecture.md, "Clusters".
///
/// Defaults and why: a heartbeat every `heartbeat_interval` (1 s) and a member declared dead
/// `member_timeout` (3 s) after its last one. A SIGKILLed member's Will deletes its record at once;
/// a SIGSTOPped or cut-off one is noticed at most 3 s after its last heartbeat, so survivors
/// subscribe its channels well within the 5 s the contract allows, with two heartbeats' worth of
/// slack for a late or lost (QoS 0) heartbeat before a live member is wrongly declared dead.
public struct ClusterSettings: Sendable, Equatable {
    /// `group` (required, `[a-z0-9_-]+`): daemons with the same group make up one bridge.
    public var group: String
    /// `instance` (required, `[a-z0-9_-]+` after `${VAR}` expansion): unique inside the group.
    public var instance: String
    /// `membership_topic`, default `pusher-mqtt-bridge/cluster/<group>`: the root of the
    /// membership, heartbeat and held topics.
    public var membershipTopic: String
    /// `heartbeat_interval`, default 1 s (at least 100 ms).
    public var heartbeatInterval: Duration
    /// `member_timeout`, default 3 s (at least twice `heartbeat_interval`): a member whose last
    /// heartbeat is older is dead, even while its retained record still exists.
    public var memberTimeout: Duration
    /// `join_settle`, default 2 s: how long a member that joins while this one is active must stay
    /// live before channels move to it, so a flapping member does not make channels bounce. A
    /// member that dies loses its channels at once; no settle applies to deaths.
    public var joinSettle: Duration
    /// How long an old holder keeps a channel after it moved, waiting for the new holder to
    /// report it subscribed: 5 s (docs/contract.md §7.4, "handover"). Not a key.
    public var handoverTimeout: Duration
    /// How long the old holder keeps a channel after the new holder reported it: the events Pusher
    /// sent the old holder before the new one subscribed may still wait in its socket or pipeline
    /// when the report arrives (the two travel different paths), and leaving drops them. 500 ms.
    public var handoverLinger: Duration = .milliseconds(500)
    /// `mqtt_to_pusher`, default `shared`: how the members share the MQTT → Pusher rules' messages.
    public var mqttToPusher: ClusterMQTTToPusher = .shared

    public init(
        group: String, instance: String, membershipTopic: String? = nil, heartbeatInterval: Duration = .seconds(1),
        memberTimeout: Duration = .seconds(3), joinSettle: Duration = .seconds(2), handoverTimeout: Duration = .seconds(5)
    ) {
        self.group = group
        self.instance = instance
        self.membershipTopic = membershipTopic ?? Self.defaultMembershipTopic(group: group)
        self.heartbeatInterval = heartbeatInterval
        self.memberTimeout = memberTimeout
        self.joinSettle = joinSettle
        self.handoverTimeout = handoverTimeout
    }

    /// `pusher-mqtt-bridge/cluster/<group>`.
    public static func defaultMembershipTopic(group: String) -> String { "pusher-mqtt-bridge/cluster/\(group)" }

    /// The retained record of `instance`: `<membership_topic>/members/<instance>`.
    public func memberTopic(_ instance: String) -> String { "\(membershipTopic)/members/\(instance)" }
    /// Where `instance` sends its heartbeats (not retained): `<membership_topic>/heartbeat/<instance>`.
    public func heartbeatTopic(_ instance: String) -> String { "\(membershipTopic)/heartbeat/\(instance)" }
    /// Where `instance` reports the channels it is subscribed to (not retained): `<membership_topic>/held/<instance>`.
    public func heldTopic(_ instance: String) -> String { "\(membershipTopic)/held/\(instance)" }
    /// Where the member running `rule`'s discovery publishes the channels it found (retained):
    /// the head, part 0, on `<membership_topic>/discovered/<rule>`, part i on
    /// `<membership_topic>/discovered/<rule>/<i>` (``ClusterDiscoveredList``).
    public func discoveredTopic(rule: String, part: Int = 0) -> String {
        part == 0 ? "\(membershipTopic)/discovered/\(rule)" : "\(membershipTopic)/discovered/\(rule)/\(part)"
    }
    /// Where a member asks `instance` for a full snapshot of its held channels (not retained):
    /// `<membership_topic>/resync/<instance>` (``ClusterSnapshotRequest``).
    public func resyncTopic(_ instance: String) -> String { "\(membershipTopic)/resync/\(instance)" }
    /// The one subscription that receives every kind: `<membership_topic>/#` (the parts of a
    /// discovered list are one level deeper than the rest).
    public var membershipFilter: String { "\(membershipTopic)/#" }

    /// What a message on `topic` under the membership topic is, or nil when it is none of ours.
    public func classify(topic: String) -> ClusterTopic? {
        let prefix = membershipTopic + "/"
        guard topic.hasPrefix(prefix) else { return nil }
        let levels = topic.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        if levels.count == 3, levels[0] == "discovered", !levels[1].isEmpty {
            // `1`…`9999`, written without leading zeros, so that the topic rebuilds to itself.
            guard let part = Int(levels[2]), part >= 1, part <= ClusterDiscoveredList.maxParts, String(part) == levels[2] else {
                return nil
            }
            return .discoveredPart(rule: String(levels[1]), part: part)
        }
        guard levels.count == 2 else { return nil }
        if levels[0] == "discovered" {
            // Rule names, and `presence:<prefix>`: a channel prefix has no `/`, `+` or `#`.
            return levels[1].isEmpty ? nil : .discovered(rule: String(levels[1]))
        }
        guard LoadContext.isBridgeName(String(levels[1])) else { return nil }
        let instance = String(levels[1])
        switch levels[0] {
        case "members": return .member(instance: instance)
        case "heartbeat": return .heartbeat(instance: instance)
        case "held": return .held(instance: instance)
        case "resync": return .resync(instance: instance)
        default: return nil
        }
    }
}

/// The kinds of message under a cluster's membership topic.
public enum ClusterTopic: Sendable, Equatable {
    /// `<membership_topic>/members/<instance>`: a retained member record, or its deletion.
    case member(instance: String)
    /// `<membership_topic>/heartbeat/<instance>`.
    case heartbeat(instance: String)
    /// `<membership_topic>/held/<instance>`: the channels a member reports subscribed.
    case held(instance: String)
    /// `<membership_topic>/discovered/<rule>`: the head (part 0) of the channels a prefix rule
    /// holds for the group (retained).
    case discovered(rule: String)
    /// `<membership_topic>/discovered/<rule>/<part>`: a further part of that list (retained).
    case discoveredPart(rule: String, part: Int)
    /// `<membership_topic>/resync/<instance>`: a request that the member send a full held snapshot.
    case resync(instance: String)
}

extension BridgeSettings {
    /// The MQTT client id this daemon uses: `client_id`, or `client_id-<instance>` in a cluster
    /// (docs/contract.md §7.4, "identity": each member needs its own session).
    public var effectiveMQTTClientID: String {
        cluster.map { "\(mqtt.clientID)-\($0.instance)" } ?? mqtt.clientID
    }

    /// The status topic this daemon writes: `status_topic`, or `<status_topic>/<instance>` in a cluster.
    public var effectiveStatusTopic: String {
        cluster.map { "\(mqtt.statusTopic)/\($0.instance)" } ?? mqtt.statusTopic
    }

    /// The state directory this daemon's spools live under: `state_dir`, or `<state_dir>/<instance>`
    /// in a cluster, so two members sharing one `state_dir` (one host, two units) never share a spool.
    public func effectiveStateDirectory(daemonStateDirectory: String) -> String {
        guard let cluster else { return daemonStateDirectory }
        let base = daemonStateDirectory.hasSuffix("/") ? String(daemonStateDirectory.dropLast()) : daemonStateDirectory
        return "\(base)/\(cluster.instance)"
    }
}

/// `[bridge.cluster] mqtt_to_pusher` (docs/contract.md §8.4): how the members of a cluster share the
/// messages of the MQTT → Pusher rules.
public enum ClusterMQTTToPusher: String, Sendable, Equatable, CaseIterable {
    /// Each rule's filter is the shared subscription `$share/<group>/<filter>`: the broker gives each
    /// message to one member. Order per channel holds within one member only.
    case shared
    /// Every member subscribes the filters itself and sends a message only when it owns the message's
    /// rendered Pusher channel (``ClusterPartition``): for brokers without shared subscriptions, and
    /// order per channel across the cluster. Each member receives every message.
    case partition
}
