import Testing

@testable import BridgeCore

/// ``RendezvousHash``: the same in every process and version, balanced, and minimal movement.
@Suite struct ClusterHashingTests {
    @Test func scoresArePinned() {
        // Changing these moves channels between members of a cluster running mixed versions.
        #expect(RendezvousHash.score(member: "a", key: "private-device-0001") == 0x3aa6_cff6_79ec_866c)
        #expect(RendezvousHash.score(member: "b", key: "private-device-0001") == 0x4a7b_83f0_559d_2d4f)
        #expect(RendezvousHash.score(member: "", key: "") == 0x1bbd_5c81_3c69_a8d7)
        #expect(RendezvousHash.score(member: "ab", key: "c") != RendezvousHash.score(member: "a", key: "bc"))
    }

    @Test func theOwnerDoesNotDependOnTheOrderOfMembers() {
        for index in 0..<200 {
            let key = "channel-\(index)"
            let owner = RendezvousHash.owner(of: key, among: ["a", "b", "c", "d"])
            #expect(RendezvousHash.owner(of: key, among: ["d", "c", "b", "a"]) == owner)
            #expect(RendezvousHash.owner(of: key, among: ["b", "d", "a", "c"]) == owner)
        }
        #expect(RendezvousHash.owner(of: "x", among: [String]()) == nil)
    }

    @Test(arguments: [["a", "b", "c"], ["node-1", "node-2", "node-3"], ["web-eu-1", "web-us-1", "web-ap-1"]])
    func tenThousandChannelsSplitEvenly(members: [String]) {
        var counts: [String: Int] = [:]
        for index in 0..<10_000 {
            let owner = RendezvousHash.owner(of: "private-device-\(index)", among: members) ?? ""
            counts[owner, default: 0] += 1
        }
        for member in members {
            let share = Double(counts[member] ?? 0) / 10_000
            #expect(abs(share - 1.0 / 3.0) <= 0.03, "\(member) holds \(share)")
        }
    }

    @Test func isOwnerAgreesWithOwner() {
        let members = (0..<50).map { "m\($0)" }
        for index in 0..<2_000 {
            let key = "private-device-\(index)"
            let owner = RendezvousHash.owner(of: key, among: members)
            for member in members.prefix(5) + [owner ?? ""] {
                #expect(RendezvousHash.isOwner(member, of: key, against: members.filter { $0 != member }) == (owner == member))
            }
        }
    }

    @Test func aJoinOrALeaveMovesOnlyTheChannelsOfThatMember() {
        let channels = (0..<3_000).map { "presence-room-\($0)" }
        let three = channels.map { RendezvousHash.owner(of: $0, among: ["a", "b", "c"]) }
        let four = channels.map { RendezvousHash.owner(of: $0, among: ["a", "b", "c", "d"]) }
        let two = channels.map { RendezvousHash.owner(of: $0, among: ["a", "c"]) }
        var movedToD = 0
        for index in channels.indices {
            if four[index] != three[index] {
                #expect(four[index] == "d")
                movedToD += 1
            }
            if two[index] != three[index] { #expect(three[index] == "b") }
        }
        #expect((600...900).contains(movedToD), "about a quarter moves to the new member: \(movedToD)")
    }

    @Test func discoveryAndStatusKeysCannotBeChannels() {
        #expect(RendezvousHash.discoveryKey(rule: "devices") == "rule:devices")
        #expect(RendezvousHash.statusKey(instance: "a") == "status:a")
        #expect(RendezvousHash.channelKey("private-a") == "private-a")
    }
}

/// The payloads and topics of the membership (docs/architecture.md, "Clusters").
@Suite struct ClusterMessagesTests {
    let settings = ClusterSettings(group: "factory", instance: "a")

    @Test func recordsRoundTrip() throws {
        let record = ClusterMemberRecord(instance: "a", incarnation: "5f0c\"x", startedAt: 1_795_000_000_123)
        #expect(String(decoding: record.payload, as: UTF8.self) == #"{"instance":"a","incarnation":"5f0c\"x","started_at":1795000000123}"#)
        #expect(ClusterMemberRecord(payload: record.payload, instance: "a") == record)
        #expect(ClusterMemberRecord(payload: record.payload, instance: "b") == nil, "another instance's topic")
    }

    @Test func heartbeatsAndHeldReportsRoundTrip() {
        let heartbeat = ClusterHeartbeat(instance: "a", incarnation: "x", sequence: 42)
        #expect(String(decoding: heartbeat.payload, as: UTF8.self) == #"{"instance":"a","incarnation":"x","seq":42,"held_seq":0}"#)
        #expect(ClusterHeartbeat(payload: heartbeat.payload, instance: "a") == heartbeat)
        let report = ClusterHeldReport(instance: "a", incarnation: "x", channels: ["private-a", "presence-\u{e9}"])
        #expect(ClusterHeldReport(payload: report.payload, instance: "a") == report)
        let empty = ClusterHeldReport(instance: "a", incarnation: "x", channels: [])
        #expect(
            String(decoding: empty.payload, as: UTF8.self)
                == #"{"instance":"a","incarnation":"x","seq":1,"part":1,"parts":1,"channels":[]}"#)
        #expect(ClusterHeldReport(payload: empty.payload, instance: "a") == empty)
    }

    @Test(arguments: [
        "", "not json", "[]", "{", #"{"instance":"a"}"#, #"{"instance":"a","incarnation":""}"#, #"{"instance":"a","incarnation":7}"#,
        #"{"instance":"a","incarnation":"x"} trailing"#, #"{"instance":"b","incarnation":"x"}"#,
    ])
    func badPayloadsAreNoMessages(text: String) {
        let bytes = Array(text.utf8)
        #expect(ClusterMemberRecord(payload: bytes, instance: "a") == nil)
        #expect(ClusterHeartbeat(payload: bytes, instance: "a") == nil)
        #expect(ClusterHeldReport(payload: bytes, instance: "a") == nil)
    }

    @Test func heldReportsNeedAListOfStrings() {
        for text in [#"{"instance":"a","incarnation":"x"}"#, #"{"instance":"a","incarnation":"x","channels":["c",1]}"#] {
            #expect(ClusterHeldReport(payload: Array(text.utf8), instance: "a") == nil)
        }
    }

    @Test func unknownFieldsAreIgnored() {
        let text = #"{"version":2,"instance":"a","extra":{"deep":[1,{"x":null}]},"incarnation":"x","started_at":5,"tags":["t"]}"#
        #expect(
            ClusterMemberRecord(payload: Array(text.utf8), instance: "a")
                == ClusterMemberRecord(instance: "a", incarnation: "x", startedAt: 5))
    }

    @Test func topicsAreClassified() {
        #expect(settings.membershipTopic == "pusher-mqtt-bridge/cluster/factory")
        #expect(settings.memberTopic("b") == "pusher-mqtt-bridge/cluster/factory/members/b")
        #expect(settings.heartbeatTopic("b") == "pusher-mqtt-bridge/cluster/factory/heartbeat/b")
        #expect(settings.heldTopic("b") == "pusher-mqtt-bridge/cluster/factory/held/b")
        #expect(settings.membershipFilter == "pusher-mqtt-bridge/cluster/factory/#")
        #expect(settings.classify(topic: settings.memberTopic("b")) == .member(instance: "b"))
        #expect(settings.classify(topic: settings.heartbeatTopic("b")) == .heartbeat(instance: "b"))
        #expect(settings.classify(topic: settings.heldTopic("b")) == .held(instance: "b"))
        for topic in [
            "pusher-mqtt-bridge/cluster/factory/members/B", "pusher-mqtt-bridge/cluster/factory/members/",
            "pusher-mqtt-bridge/cluster/factory/x/b",
            "pusher-mqtt-bridge/cluster/factory/members/b/c", "pusher-mqtt-bridge/cluster/factoryx/members/b", "other/members/b",
        ] {
            #expect(settings.classify(topic: topic) == nil, "\(topic)")
        }
    }
}
