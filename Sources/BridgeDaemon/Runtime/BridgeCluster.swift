import BridgeCore
import Locking
import MQTTVocabulary
import MosquittoClient

/// The cluster state of one bridge (docs/contract.md §7.4): BridgeCore's ``ClusterMembership``
/// decides who holds which channel; this holds it with what the runtime feeds it — the channels
/// the configuration names and the group's discovered channels — and the queue of membership
/// publishes. The executor is BridgeRuntime+Cluster.swift.
final class BridgeCluster: Sendable {
    /// A membership publish, or a point the stopping bridge waits for.
    enum Outgoing: Sendable {
        case message(MQTTMessage)
        /// Resumed once every publish queued before it was handed to the MQTT client.
        case barrier(CheckedContinuation<Void, Never>)
    }

    /// Everything the lock guards; it never guards I/O.
    struct View: Sendable {
        var membership: ClusterMembership
        /// Channels the configuration names (the bridge machine's subscribe and unsubscribe).
        var configured: Set<String> = []
        /// The discovery rules of the configuration: lists of other rules are ignored.
        var discoveryRules: Set<String>
        /// The group's discovered channels per rule: the retained lists on the broker.
        var discovered: [String: Set<String>] = [:]
        /// What this member's own discovery holds per rule (meaningful where it is the owner).
        var localDiscovered: [String: Set<String>] = [:]
        /// The rules this member polls: owner, and polled at least once since it became owner, so
        /// its list is worth publishing (an owner that has not polled yet would publish nothing).
        var polledAsOwner: Set<String> = []
        /// The rules this member owned at the last check.
        var ownedRules: Set<String> = []
        /// Whether ``configured`` or ``discovered`` changed since the machine last heard of them.
        var wantedChanged = false
        /// Set by `leaveCompleted`.
        var leaveCompleted = false
        /// The latest held report not yet published, and when it goes out: reports are coalesced
        /// for ``heldReportDelay``, so taking 3,000 channels sends a few lists, not 3,000 growing ones.
        var pendingHeld: ClusterHeldReport?
        var pendingHeldDue: ContinuousClock.Instant?

        /// Every channel the group must hold.
        var wanted: Set<String> {
            var all = configured
            for rule in discoveryRules { all.formUnion(discovered[rule] ?? []) }
            return all
        }
    }

    let settings: ClusterSettings
    /// `status_topic` as configured: a member's status is `<status_topic>/<instance>`.
    let statusTopicBase: String
    let view: Locked<View>
    /// The user property on everything members of this group publish from Pusher.
    let marker: MQTTUserProperty
    /// How long a held report waits for the next change before it is published.
    static let heldReportDelay = Duration.milliseconds(50)
    /// Membership publishes, in order: run by ``BridgeRuntime/runClusterPublisher()``.
    let outgoing = AsyncStream.makeStream(of: Outgoing.self)
    /// Wakes the stopping bridge when the machine reports `leaveCompleted`.
    let leaveWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    /// Limits the log lines of unreadable membership messages.
    let badMessageLog = Locked(RateLimitedLog<ContinuousClock.Instant>(perMinute: 6))

    init(settings: ClusterSettings, bridge: BridgeSettings) {
        self.settings = settings
        statusTopicBase = bridge.mqtt.statusTopic
        marker = MQTTUserProperty("pusher-mqtt-bridge-cluster", settings.group)
        var incarnation = ""
        for _ in 0..<8 { incarnation += String(UInt8.random(in: 0...255), radix: 16).leftPadded(to: 2) }
        var membership = ClusterMembership(
            settings: settings, incarnation: incarnation, startedAt: UTCTimestamp.now().millisecondsSince1970)
        membership.clientID = bridge.effectiveMQTTClientID
        view = Locked(View(membership: membership, discoveryRules: Set(bridge.discoveryRules.map(\.name))))
    }

    /// The held report's publish.
    func message(for report: ClusterHeldReport) -> MQTTMessage {
        MQTTMessage(topic: settings.heldTopic(settings.instance), payload: report.payload, qos: .atLeastOnce)
    }

    /// The Will's user properties: which process's record it deletes (`incarnation`, `started_at`),
    /// so that a member that receives the deletion of its own record from another process's Will
    /// knows a second process uses its instance and client id.
    var willUserProperties: [MQTTUserProperty] {
        view.withLock { view in
            [
                MQTTUserProperty("incarnation", view.membership.incarnation),
                MQTTUserProperty("started_at", String(view.membership.startedAt)),
            ]
        }
    }

    /// The membership publish for `action`, or nil when it is none or, for held reports, not yet.
    func message(for action: ClusterAction) -> MQTTMessage? {
        switch action {
        case .publishRecord(let record):
            return MQTTMessage(topic: settings.memberTopic(settings.instance), payload: record.payload, qos: .atLeastOnce, retain: true)
        case .deleteRecord:
            return MQTTMessage(topic: settings.memberTopic(settings.instance), payload: [], qos: .atLeastOnce, retain: true)
        case .publishHeartbeat(let heartbeat):
            return MQTTMessage(topic: settings.heartbeatTopic(settings.instance), payload: heartbeat.payload, qos: .atMostOnce)
        case .publishMemberOffline(let instance):
            return MQTTMessage(topic: "\(statusTopicBase)/\(instance)", payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        case .publishHeld, .subscribeChannel, .unsubscribeChannel, .leaveCompleted, .report:
            return nil
        }
    }
}

extension String {
    /// The string with leading zeros up to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
