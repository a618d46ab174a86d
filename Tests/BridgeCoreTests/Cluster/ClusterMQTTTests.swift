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
                MQTTSubscription("pusher-mqtt-bridge/cluster/factory/+/+", qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways),
            ])
        #expect(bridge.effectiveMQTTSubscriptions.last?.purposes == ["cluster factory"])
        #expect(bridge.lastWill == BridgeLastWill(topic: "pusher-mqtt-bridge/cluster/factory/members/node-1", payload: []))
        #expect(bridge.guardsAgainstEchoesByDigest)
    }
}
