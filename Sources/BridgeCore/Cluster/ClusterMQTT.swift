import MQTTVocabulary

/// What a cluster changes at the MQTT level (docs/contract.md §7.4), computed from the settings so
/// the runtime only has to use it: the subscriptions, the Last Will and the echo guard
/// (docs/architecture.md, "Clusters").
extension BridgeSettings {
    /// The subscriptions this daemon makes. Alone: ``mqttSubscriptions``. In a cluster:
    /// - each rule's filter becomes the shared subscription `$share/<group>/<filter>`, so the broker
    ///   gives each message to one member. MQTT 5 forbids No Local on a shared subscription (a
    ///   protocol error), so it is off and ``guardsAgainstEchoesByDigest`` takes over; the broker
    ///   sends no retained messages to shared subscriptions, so `forward_retained` has no effect;
    /// - presence mirrors' `T/members/+` stay plain: they must see the retained members;
    /// - the membership filter `<membership_topic>/#` is added: QoS 1, retained messages sent,
    ///   without No Local (a member must see its own record, to notice it deleted or overwritten).
    /// A filter that serves both a rule and a mirror is shared (the rule's messages must not arrive twice).
    /// With `mqtt_to_pusher = "partition"` the rules' filters stay plain: every member receives every
    /// message and sends those of the channels it owns (``ClusterPartition``); retained messages are sent.
    public var effectiveMQTTSubscriptions: [BridgeSubscription] {
        guard let cluster else { return mqttSubscriptions }
        var subscriptions = mqttSubscriptions.map { needed -> BridgeSubscription in
            guard cluster.mqttToPusher == .shared, needed.purposes.contains(where: { $0.hasPrefix("rule ") }) else { return needed }
            var shared = needed
            shared.subscription.filter = "$share/\(cluster.group)/\(needed.subscription.filter)"
            shared.subscription.noLocal = false
            return shared
        }
        subscriptions.append(
            BridgeSubscription(
                MQTTSubscription(cluster.membershipFilter, qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
                purposes: ["cluster \(cluster.group)"]))
        return subscriptions
    }

    /// The Last Will this daemon registers. Alone: retained `offline` on the status topic. In a
    /// cluster the single Will deletes the member record instead (a zero-length retained message on
    /// `<membership_topic>/members/<instance>`), and a survivor writes the `offline` status.
    public var lastWill: BridgeLastWill {
        guard let cluster else { return BridgeLastWill(topic: mqtt.statusTopic, payload: Array("offline".utf8)) }
        return BridgeLastWill(topic: cluster.memberTopic(cluster.instance), payload: [])
    }

    /// The topics this daemon publishes to whatever the messages: its status, the dead letters, and
    /// in a cluster its member record (the Will), heartbeats and held reports. The loader and the
    /// start of a bridge both check them against `MQTTClientLimits`.
    public var fixedMQTTTopics: [String] {
        [effectiveStatusTopic] + (mqtt.deadLetterTopic.map { [$0] } ?? []) + clusterTopics.map(\.topic)
    }

    /// The longest topics a cluster member publishes to below `<membership_topic>`, each with how
    /// the loader names it: its record (the Will), heartbeats and held reports; a snapshot request
    /// to any member (an instance name up to the longest); each discovery rule's list parts (at most
    /// one part per channel). Empty without a cluster.
    public var clusterTopics: [(level: String, topic: String)] {
        guard let cluster else { return [] }
        let anyMember = String(repeating: "x", count: LoadContext.maximumClusterNameLength)
        return [
            ("members/<instance>", cluster.memberTopic(cluster.instance)),
            ("heartbeat/<instance>", cluster.heartbeatTopic(cluster.instance)),
            ("held/<instance>", cluster.heldTopic(cluster.instance)),
            ("resync/<member>", cluster.resyncTopic(anyMember)),
        ]
            + discoveryRules.map { rule in
                ("discovered/\(rule.name)/<part>", cluster.discoveredTopic(rule: rule.name, part: max(1, rule.settings.maxChannels)))
            }
    }

    /// Whether echoes of the bridge's own publishes are recognised by digest (docs/contract.md §5.4)
    /// rather than prevented by No Local: with MQTT 3.1.1, and in a cluster (shared subscriptions have no No Local).
    public var guardsAgainstEchoesByDigest: Bool { mqtt.protocolVersion == .v311 || cluster != nil }
}

/// A Last Will: published by the broker, retained, QoS 1, when the connection ends without DISCONNECT.
public struct BridgeLastWill: Sendable, Equatable {
    /// Where it goes.
    public var topic: String
    /// What it says; empty deletes the retained message on `topic`.
    public var payload: [UInt8]

    public init(topic: String, payload: [UInt8]) {
        self.topic = topic
        self.payload = payload
    }
}
