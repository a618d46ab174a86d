import MQTTVocabulary
import Testing

@testable import BridgeCore

/// The MQTT level of a cluster (docs/contract.md §7.4): shared subscriptions, the membership
/// subscription, the Will, the echo guard.
@Suite struct ClusterMQTTTests {
    static let rulesAndMirror = """
        [[bridge.rule]]
        name = "commands"
        from = "mqtt"
        topic = "cmd/+"
        channel = "private-cmd"
        event = "client-command"
        via = "client-event"
        [[bridge.presence]]
        channel = "presence-ops"
        topic = "ops"
        """

    @Test func aloneNothingChanges() throws {
        let text = ClusterConfigTests.config("").replacingOccurrences(of: "[bridge.cluster]", with: Self.rulesAndMirror)
        let bridge = try #require(try Fixture.parse(text).bridges.first)
        #expect(bridge.effectiveMQTTSubscriptions == bridge.mqttSubscriptions)
        #expect(bridge.lastWill == BridgeLastWill(topic: "pusher-mqtt-bridge/factory/status", payload: Array("offline".utf8)))
        #expect(bridge.guardsAgainstEchoesByDigest == false)
    }

    @Test func inAClusterRuleFiltersAreSharedAndTheMembershipIsSubscribed() throws {
        let text = ClusterConfigTests.config(ClusterConfigTests.minimal + "\n" + Self.rulesAndMirror)
        let bridge = try #require(try Fixture.parse(text).bridges.first)
        let subscriptions = bridge.effectiveMQTTSubscriptions.map(\.subscription)
        #expect(
            subscriptions == [
                MQTTSubscription("$share/factory/cmd/+", qos: .atLeastOnce, noLocal: false, retainHandling: .never),
                MQTTSubscription("ops/members/+", qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
                MQTTSubscription("pusher-mqtt-bridge/cluster/factory/#", qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
            ])
        #expect(bridge.effectiveMQTTSubscriptions.last?.purposes == ["cluster factory"])
        #expect(bridge.lastWill == BridgeLastWill(topic: "pusher-mqtt-bridge/cluster/factory/members/node-1", payload: []))
        #expect(bridge.guardsAgainstEchoesByDigest)
    }

    /// `mqtt_to_pusher = "partition"`: the rule filters stay plain (every member receives every
    /// message and sends those whose channel it owns); the rest is as with shared subscriptions.
    @Test func inPartitionModeRuleFiltersArePlain() throws {
        let text = ClusterConfigTests.config(ClusterConfigTests.minimal + "\nmqtt_to_pusher = \"partition\"\n" + Self.rulesAndMirror)
        let bridge = try #require(try Fixture.parse(text).bridges.first)
        #expect(
            bridge.effectiveMQTTSubscriptions.map(\.subscription) == [
                MQTTSubscription("cmd/+", qos: .atLeastOnce, noLocal: true, retainHandling: .never),
                MQTTSubscription("ops/members/+", qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
                MQTTSubscription("pusher-mqtt-bridge/cluster/factory/#", qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
            ])
        #expect(bridge.guardsAgainstEchoesByDigest)
        let report = CheckReport.render(try Fixture.parse(text), file: "bridges.conf")
        #expect(report.contains("MQTT -> Pusher partition: every member subscribes each rule filter"))
    }
}

/// The bridge machine in a cluster: what it subscribes and publishes, and a presence mirror whose
/// channel went to another member (docs/contract.md §7.4).
@Suite struct ClusterBridgeMachineTests {
    typealias Machine = BridgeStateMachine<ContinuousClock.Instant>

    static func bridge() throws -> BridgeSettings {
        let text = ClusterConfigTests.config(ClusterConfigTests.minimal + "\n" + ClusterMQTTTests.rulesAndMirror)
        return try #require(try Fixture.parse(text).bridges.first)
    }

    @Test func startsWithTheSharedFiltersAndThePerInstanceStatus() throws {
        let settings = try Self.bridge()
        var machine = Machine(settings: settings)
        let started = machine.started()
        let shared = MQTTSubscription("$share/factory/cmd/+", qos: .atLeastOnce, retainHandling: .never)
        #expect(started.contains(.subscribeTopicFilter(shared)))
        #expect(started.contains(.subscribeChannel("presence-ops")))
        let connected = machine.mqttConnectionChanged(to: "connected", connected: true, now: .now, receivedAtMillis: 0)
        #expect(connected.contains(.publishStatus(topic: "pusher-mqtt-bridge/factory/status/node-1", payload: "online")))
    }

    @Test func aReleasedPresenceChannelStopsPublishing() throws {
        var machine = Machine(settings: try Self.bridge())
        var actions: [Machine.Action] = []
        machine.presenceSubscribed(channel: "presence-ops", members: [PresenceMember(userID: "u1")], receivedAtMillis: 0, into: &actions)
        #expect(!actions.isEmpty)
        actions = []
        let reconnected = machine.mqttConnectionChanged(to: "connected", connected: true, now: .now, receivedAtMillis: 0)
        #expect(reconnected.contains { if case .enqueueToMQTT(let publish, _) = $0 { publish.topic == "ops/members/u1" } else { false } })
        #expect(machine.channelReleased("presence-ops", receivedAtMillis: 0).isEmpty)
        #expect(machine.channelReleased("presence-unknown", receivedAtMillis: 0).isEmpty)
        let later = machine.mqttConnectionChanged(to: "connected", connected: true, now: .now, receivedAtMillis: 0)
        #expect(!later.contains { if case .enqueueToMQTT = $0 { true } else { false } }, "only the holder's mirror publishes")
    }
}
