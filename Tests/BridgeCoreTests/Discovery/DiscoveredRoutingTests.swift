import Foundation
import TestSupport
import Testing

@testable import BridgeCore

/// Events on discovered channels through prefix rules, and presence rooms found under a prefix
/// mirror (docs/contract.md §7.1, §5.3).
@Suite struct DiscoveredRoutingTests {
    typealias Machine = BridgeStateMachine<TestInstant>
    typealias Action = Machine.Action

    static let rules = """
        [[bridge.rule]]
        name = "devices"
        from = "pusher"
        channel_prefix = "private-device-"
        events = ["reading"]
        topic = "fleet/{suffix}/{event}"
        [[bridge.rule]]
        name = "one-device"
        from = "pusher"
        channel = "private-device-007"
        topic = "special/{channel}"
        [[bridge.rule]]
        name = "wide"
        from = "pusher"
        channel_prefix = "private-"
        topic = "all/{channel}/{suffix}"
        [[bridge.presence]]
        channel_prefix = "presence-room-"
        topic = "dash/rooms/{suffix}"
        [[bridge.presence]]
        channel = "presence-lobby"
        topic = "lobby"
        """

    static func settings(_ extra: String = rules) throws -> BridgeSettings {
        try #require(Fixture.parse(Fixture.config(extra: extra)).bridges.first)
    }

    let millis = Fixture.time.millisecondsSince1970

    @Test func exactRulesFirstThenPrefixRulesWithTheSuffix() throws {
        let table = RuleTable(bridge: try Self.settings())
        let routing = table.route(channel: "private-device-007", event: "reading", data: "21", userID: nil, receivedAt: Fixture.time)
        #expect(routing.publishes.map(\.rule) == ["one-device", "devices", "wide"])
        #expect(routing.publishes.map(\.topic) == ["special/private-device-007", "fleet/007/reading", "all/private-device-007/device-007"])
        #expect(routing.publishes.map(\.payload) == Array(repeating: Array("21".utf8), count: 3))
        let other = table.route(channel: "private-device-12", event: "status", data: "x", userID: nil, receivedAt: Fixture.time)
        #expect(other.publishes.map(\.topic) == ["all/private-device-12/device-12"])
        // The prefix alone, or a channel outside every prefix: no rule.
        #expect(table.route(channel: "private-", event: "reading", data: "x", userID: nil, receivedAt: Fixture.time).isUnmatched)
        #expect(table.route(channel: "public-x", event: "reading", data: "x", userID: nil, receivedAt: Fixture.time).isUnmatched)
        // Protocol events never.
        #expect(
            table.route(channel: "private-device-1", event: "pusher:subscription_count", data: "{}", userID: nil, receivedAt: Fixture.time)
                .isUnmatched)
        #expect(table.pusherRuleIndices(forChannel: "private-device-1") == [0, 2])
    }

    @Test func theSuffixIsEscapedLikeAnyTopicValue() throws {
        let table = RuleTable(bridge: try Self.settings())
        // Not a valid channel name, but whatever reaches a template is escaped (docs/contract.md §5.1).
        let routing = table.route(channel: "private-device-a/b#c", event: "reading", data: "1", userID: nil, receivedAt: Fixture.time)
        #expect(routing.publishes.first?.topic == "fleet/a%2Fb%23c/reading")
    }

    @Test func discoveredRoomsMirrorMembersUnderTheirOwnTopic() throws {
        var machine = Machine(settings: try Self.settings())
        #expect(machine.started().contains(.subscribeChannel("presence-lobby")))
        #expect(!machine.started().contains(.subscribeChannel("presence-room-")))
        var actions: [Action] = []
        // Not joined yet: the member list is not mirrored.
        machine.presenceSubscribed(
            channel: "presence-room-a", members: [PresenceMember(userID: "ann")], receivedAtMillis: millis, into: &actions)
        #expect(actions.isEmpty)
        // A ghost left by an earlier run is remembered until the room is joined.
        machine.mqttMessageReceived(
            topic: "dash/rooms/a/members/ghost", payload: Array("{}".utf8), qos: 1, retain: true, receivedAt: Fixture.time,
            now: .at(milliseconds: 0),
            into: &actions)
        #expect(actions.isEmpty)
        #expect(machine.discoveredRoomJoined("presence-room-a", receivedAtMillis: millis).isEmpty)
        #expect(machine.isDiscoveredRoom("presence-room-a"))
        #expect(!machine.isDiscoveredRoom("presence-lobby"))
        machine.presenceSubscribed(
            channel: "presence-room-a", members: [PresenceMember(userID: "ann", infoJSON: #"{"n":1}"#)], receivedAtMillis: millis,
            into: &actions)
        #expect(
            Self.publishes(actions) == [
                "dash/rooms/a/members/ann=" + #"{"n":1}"#, "dash/rooms/a/members/ghost=", "dash/rooms/a/count=1",
            ])
        actions.removeAll()
        machine.presenceMemberAdded(
            channel: "presence-room-a", member: PresenceMember(userID: "bob"), receivedAtMillis: millis, into: &actions)
        #expect(Self.publishes(actions) == ["dash/rooms/a/members/bob={}", "dash/rooms/a/count=2"])
        // Leaving clears the members and the count.
        let left = machine.discoveredRoomLeft("presence-room-a", receivedAtMillis: millis)
        #expect(Self.publishes(left) == ["dash/rooms/a/members/ann=", "dash/rooms/a/members/bob=", "dash/rooms/a/count="])
        #expect(!machine.isDiscoveredRoom("presence-room-a"))
        // A configured mirror is never cleared by discovery; unknown rooms change nothing.
        #expect(machine.discoveredRoomLeft("presence-lobby", receivedAtMillis: millis).isEmpty)
        #expect(machine.discoveredRoomJoined("presence-hall-1", receivedAtMillis: millis).isEmpty)
        #expect(!machine.isDiscoveredRoom("presence-hall-1"))
    }

    @Test func ghostsOfRoomsNobodyIsInAreClearedAfterAPoll() throws {
        var machine = Machine(settings: try Self.settings())
        var actions: [Action] = []
        for topic in ["dash/rooms/a/members/x", "dash/rooms/b%2Fc/members/y", "dash/rooms/b%2Fc/members/z", "dash/rooms/d/members/w"] {
            machine.mqttMessageReceived(
                topic: topic, payload: Array("{}".utf8), qos: 1, retain: true, receivedAt: Fixture.time, now: .at(milliseconds: 0),
                into: &actions)
        }
        // The bridge holds room d: its mirror has the ghost and decides with its member list.
        _ = machine.discoveredRoomJoined("presence-room-d", receivedAtMillis: millis)
        #expect(machine.discoveredRoomsPolled(prefix: "presence-hall-", occupied: [], receivedAtMillis: millis).isEmpty)
        let cleared = machine.discoveredRoomsPolled(prefix: "presence-room-", occupied: ["presence-room-a"], receivedAtMillis: millis)
        #expect(Self.publishes(cleared) == ["dash/rooms/b%2Fc/members/y=", "dash/rooms/b%2Fc/members/z=", "dash/rooms/b%2Fc/count="])
        // Nothing left to clear for b; a waits for its join.
        #expect(machine.discoveredRoomsPolled(prefix: "presence-room-", occupied: ["presence-room-a"], receivedAtMillis: millis).isEmpty)
        #expect(
            Self.publishes(machine.discoveredRoomsPolled(prefix: "presence-room-", occupied: [], receivedAtMillis: millis)) == [
                "dash/rooms/a/members/x=", "dash/rooms/a/count=",
            ])
    }

    @Test func retainedMembersOfRoomsAreNeverRoutedAsMessages() throws {
        var machine = Machine(settings: try Self.settings())
        var actions: [Action] = []
        machine.mqttMessageReceived(
            topic: "dash/rooms/x/members/y", payload: Array("{}".utf8), qos: 1, retain: true, receivedAt: Fixture.time,
            now: .at(milliseconds: 0),
            into: &actions)
        #expect(!actions.contains(.count(rule: "", direction: .mqttToPusher, outcome: .unmatched, by: 1)))
    }

    @Test func reloadKeepsRoomsOfAnUnchangedPrefixMirrorAndClearsTheOthers() throws {
        var machine = Machine(settings: try Self.settings())
        var actions: [Action] = []
        _ = machine.discoveredRoomJoined("presence-room-a", receivedAtMillis: millis)
        machine.presenceSubscribed(
            channel: "presence-room-a", members: [PresenceMember(userID: "ann")], receivedAtMillis: millis, into: &actions)
        let same = machine.rulesReplaced(by: try Self.settings(), receivedAtMillis: millis, now: .at(milliseconds: 0))
        #expect(Self.publishes(same).isEmpty)
        #expect(machine.isDiscoveredRoom("presence-room-a"))
        let moved = try Self.settings(Self.rules.replacingOccurrences(of: "dash/rooms/{suffix}", with: "dash/r/{suffix}"))
        let changed = machine.rulesReplaced(by: moved, receivedAtMillis: millis, now: .at(milliseconds: 0))
        #expect(Self.publishes(changed) == ["dash/rooms/a/members/ann=", "dash/rooms/a/count="])
        #expect(!machine.isDiscoveredRoom("presence-room-a"))
        #expect(machine.discoveredRoomJoined("presence-room-a", receivedAtMillis: millis).isEmpty)
        actions.removeAll()
        machine.presenceSubscribed(channel: "presence-room-a", members: [], receivedAtMillis: millis, into: &actions)
        #expect(Self.publishes(actions) == ["dash/r/a/count=0"])
    }

    /// Retained publishes as `topic=payload`.
    static func publishes(_ actions: [Action]) -> [String] {
        actions.compactMap { action in
            guard case .enqueueToMQTT(let publish, _) = action, publish.retain else { return nil }
            return publish.topic + "=" + String(decoding: publish.payload, as: UTF8.self)
        }
    }
}
