import Backoff
import Testing

@testable import BridgeCore

/// Discovery in a cluster (docs/contract.md §7.4, "discovery"): the discovered list's payload and
/// topic, and the discovery machine's cluster events, on a manual clock.
@Suite struct ClusterDiscoveryTests {
    typealias Action = ChannelDiscovery.Action
    let t0 = ContinuousClock.now
    let settings = ClusterSettings(group: "factory", instance: "a")

    static let devices = DiscoveryRule(
        name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(interval: .seconds(30)))

    static func machine() -> ChannelDiscovery {
        ChannelDiscovery(rules: [devices], backoff: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
    }

    @Test func discoveredListsRoundTrip() {
        let list = ClusterDiscoveredList(rule: "presence:presence-room-", channels: ["presence-room-1", "presence-room-\u{e9}"])
        #expect(ClusterDiscoveredList(payload: list.payload, rule: "presence:presence-room-") == list)
        #expect(ClusterDiscoveredList(payload: list.payload, rule: "devices") == nil, "another rule's topic")
        let empty = ClusterDiscoveredList(rule: "devices", channels: [])
        #expect(
            String(decoding: empty.payload, as: UTF8.self) == #"{"rule":"devices","generation":"cbf29ce484222325","parts":1,"channels":[]}"#
        )
        #expect(ClusterDiscoveredList(payload: empty.payload, rule: "devices") == empty)
    }

    @Test(arguments: [
        "", "null", "[]", #"{"rule":"devices"}"#, #"{"rule":"devices","channels":"c"}"#, #"{"rule":"devices","channels":["c",2]}"#,
        #"{"rule":7,"channels":[]}"#, #"{"rule":"devices","channels":[]} x"#,
    ])
    func badListsAreRefused(text: String) {
        #expect(ClusterDiscoveredList(payload: Array(text.utf8), rule: "devices") == nil)
    }

    @Test func discoveredTopicsAreClassified() {
        #expect(settings.discoveredTopic(rule: "devices") == "pusher-mqtt-bridge/cluster/factory/discovered/devices")
        #expect(settings.classify(topic: settings.discoveredTopic(rule: "devices")) == .discovered(rule: "devices"))
        let presence = settings.discoveredTopic(rule: "presence:presence-room-")
        #expect(settings.classify(topic: presence) == .discovered(rule: "presence:presence-room-"))
        #expect(settings.classify(topic: "pusher-mqtt-bridge/cluster/factory/discovered/") == nil)
        #expect(settings.classify(topic: "pusher-mqtt-bridge/cluster/factory/discovered/a/b") == nil)
        #expect(settings.discoveredTopic(rule: "devices", part: 3) == "pusher-mqtt-bridge/cluster/factory/discovered/devices/3")
        #expect(settings.classify(topic: settings.discoveredTopic(rule: "devices", part: 3)) == .discoveredPart(rule: "devices", part: 3))
        for part in ["0", "03", "10000", "-1", ""] {
            #expect(settings.classify(topic: "pusher-mqtt-bridge/cluster/factory/discovered/devices/\(part)") == nil, "\(part)")
        }
        #expect(settings.classify(topic: settings.resyncTopic("b")) == .resync(instance: "b"))
    }

    @Test func aSkippedPollKeepsHeldChannelsAndComesBackAfterTheInterval() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1", count: 2)], now: t0)
        #expect(machine.deadlineReached(now: t0 + .seconds(30)).count == 1)  // the next poll goes out
        machine.pollSkipped(rule: "devices", now: t0 + .seconds(30))
        #expect(machine.heldChannels(rule: "devices") == ["private-device-1"])
        #expect(machine.nextDeadline == t0 + .seconds(60))
        // Without a poll in flight a skip changes nothing.
        machine.pollSkipped(rule: "devices", now: t0 + .seconds(31))
        #expect(machine.nextDeadline == t0 + .seconds(60))
    }

    @Test func aNewOwnerPollsAtOnce() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        machine.pollSkipped(rule: "devices", now: t0)
        #expect(machine.nextDeadline == t0 + .seconds(30))
        machine.pollSoon(rule: "devices", now: t0 + .seconds(2))
        #expect(machine.nextDeadline == t0 + .seconds(2))
        #expect(
            machine.deadlineReached(now: t0 + .seconds(2)) == [
                .poll(rule: "devices", prefix: "private-device-", info: "subscription_count")
            ])
        // In flight: a second pollSoon does not start another.
        machine.pollSoon(rule: "devices", now: t0 + .seconds(3))
        #expect(machine.nextDeadline == nil)
        machine.pollSoon(rule: "unknown", now: t0 + .seconds(3))
    }

    /// The owner's discovery learns from held reports that the bridge is subscribed, whichever
    /// member holds the channel: a count of 1 then means the bridge alone, and the channel is left.
    @Test func aChannelHeldByAnotherMemberIsLeftWhenOnlyTheBridgeIsThere() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1", count: 2)], now: t0)
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        // No member reported it yet: a count of 1 is somebody else, the channel stays.
        var actions = machine.pollSucceeded(
            rule: "devices", channels: [OccupiedChannel("private-device-1", count: 1)], now: t0 + .seconds(30))
        #expect(actions.isEmpty)
        machine.heldByGroup(["private-device-1", "private-device-unknown"], now: t0 + .seconds(31))
        _ = machine.deadlineReached(now: t0 + .seconds(60))
        actions = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1", count: 1)], now: t0 + .seconds(60))
        #expect(actions.contains(.left(channel: "private-device-1", rule: "devices", reason: .alone)))
        #expect(machine.heldChannels(rule: "devices").isEmpty)
    }

    /// The member holding a channel died: until a new holder reports it, the group has no
    /// subscription there, so a count of 1 is the device, not the bridge alone (the fleet bench:
    /// a poll between a SIGKILL and the takers' reports left 14,000 of the dead member's channels).
    @Test func aChannelWhoseHolderDiedIsNotLeftOnACountTakenBeforeANewHolderReportsIt() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1", count: 2)], now: t0)
        machine.heldByGroup(["private-device-1"], now: t0 + .seconds(1))
        machine.heldByGroupLost(["private-device-1", "private-device-unknown"])
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        var actions = machine.pollSucceeded(
            rule: "devices", channels: [OccupiedChannel("private-device-1", count: 1)], now: t0 + .seconds(30))
        #expect(actions.isEmpty, "the count of 1 is the device: no member is in the channel yet")
        #expect(machine.heldChannels(rule: "devices") == ["private-device-1"])
        // A new holder reports it: from then on a count of 1 is the bridge alone again.
        machine.heldByGroup(["private-device-1"], now: t0 + .seconds(31))
        _ = machine.deadlineReached(now: t0 + .seconds(60))
        actions = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1", count: 1)], now: t0 + .seconds(60))
        #expect(actions.contains(.left(channel: "private-device-1", rule: "devices", reason: .alone)))
    }
}
