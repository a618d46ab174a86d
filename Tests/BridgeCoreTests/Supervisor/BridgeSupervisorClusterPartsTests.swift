import MQTTVocabulary
import Testing

@testable import BridgeCore

/// The supervisor's side of the split membership messages (docs/contract.md §7.4): a long
/// discovered list goes out in retained parts and comes back whole, a shorter one deletes the
/// parts it no longer uses, and a bad payload on any new topic is counted and ignored.
extension BridgeSupervisorTests {
    static let membership = "pusher-mqtt-bridge/cluster/factory"

    /// Feeds publishes back as the broker would (retained, to this member too).
    static func echo(_ actions: [Action], to supervisor: inout BridgeSupervisor, _ now: BridgeSupervisor.Now) -> [Action] {
        var received: [Action] = []
        for case .publishMembership(let publish) in actions where publish.topic.hasPrefix(membership + "/discovered/") {
            received += supervisor.clusterMessageReceived(topic: publish.topic, payload: publish.payload, userProperties: [], now)
        }
        return received
    }

    @Test func aLongDiscoveredListGoesOutInPartsWithin64KBAndDeletesTheRetainedPartsItNoLongerUses() throws {
        var supervisor = try activeMember()
        while let deadline = supervisor.nextDeadline, deadline <= t0 + .seconds(2) {
            _ = supervisor.tick(BridgeSupervisor.Now(deadline, millis: 0))
        }
        let now = at(.seconds(2) + .milliseconds(10))
        let tail = String(repeating: "x", count: 140)
        let names = (0..<1_000).map { "private-device-\(tail)-\($0)" }
        // A longer list retained by an earlier owner: it arrives at connect, in parts.
        let earlier = ClusterDiscoveredList.parts(rule: "devices", channels: names)
        #expect(earlier.count == 3)
        for list in earlier {
            _ = supervisor.clusterMessageReceived(
                topic: supervisor.cluster?.settings.discoveredTopic(rule: "devices", part: list.part) ?? "", payload: list.payload,
                userProperties: [], now)
        }
        #expect(supervisor.cluster?.discovered["devices"]?.count == 1_000)
        // This member's poll finds 600 of them (~100 KB): two parts, then part 2 deleted.
        let polls = supervisor.pollStarting(rule: "devices", now)
        #expect(polls)
        let found = names.prefix(600).map { OccupiedChannel($0, count: 2) }
        let polled = supervisor.pollSucceeded(rule: "devices", prefix: "private-device-", channels: found, now)
        let publishes = polled.compactMap { if case .publishMembership(let publish) = $0 { publish } else { nil } }
        #expect(publishes.allSatisfy { $0.retain && $0.payload.count <= 65_536 })
        #expect(
            publishes.map(\.topic) == [
                Self.membership + "/discovered/devices/1", Self.membership + "/discovered/devices",
                Self.membership + "/discovered/devices/2",
            ], "parts, the head, then the part no longer used")
        #expect(publishes.last?.payload.isEmpty == true)
        _ = Self.echo(polled, to: &supervisor, now)
        #expect(supervisor.cluster?.discovered["devices"] == Set(names.prefix(600)))
        #expect(supervisor.cluster?.discoveredParts["devices"]?.surplusParts(keeping: 2) == [])
    }

    @Test(arguments: ["held/b", "resync/a", "resync/b", "discovered/devices", "discovered/devices/1"])
    func badPayloadsOnEveryMembershipTopicAreCountedAndIgnored(suffix: String) throws {
        var supervisor = try activeMember()
        for payload in ["nonsense", #"{"instance":"b","incarnation":"x","seq":1,"added":["a"]}"#, #"{"rule":"devices","channels":[]}"#] {
            let actions = supervisor.clusterMessageReceived(
                topic: "\(Self.membership)/\(suffix)", payload: Array(payload.utf8), userProperties: [], at(.seconds(1)))
            #expect(actions.count == 1)
            guard case .clusterBadMessage(let topic, _, _) = actions.first else {
                Issue.record("\(suffix) \(payload): \(actions)")
                continue
            }
            #expect(topic == "\(Self.membership)/\(suffix)")
        }
    }
}
