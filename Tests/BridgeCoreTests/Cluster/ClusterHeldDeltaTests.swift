import Testing

@testable import BridgeCore

/// Held sets as snapshots and deltas (docs/contract.md §7.4, "held reports"): every message within
/// 64 KB, sequence numbers that reveal a lost or reordered message, snapshots that heal it.
@Suite struct ClusterHeldDeltaTests {
    /// `count` channel names of Pusher's greatest length, 164 characters.
    static func longNames(_ count: Int) -> [String] {
        (0..<count).map { index in
            let tail = "-\(index)"
            return "private-" + String(repeating: "x", count: 164 - 8 - tail.count) + tail
        }
    }

    static func report(_ sequence: UInt64, _ content: ClusterHeldReport.Content, incarnation: String = "x") -> ClusterHeldReport {
        ClusterHeldReport(instance: "b", incarnation: incarnation, sequence: sequence, content: content)
    }

    @Test func longSetsSplitIntoPartsWithin64KB() throws {
        let names = Self.longNames(5_000)
        #expect(names.allSatisfy { $0.utf8.count == 164 })
        let parts = ClusterHeldReport.messages(
            instance: "b", incarnation: "5f0c", socketID: "123.456", firstSequence: 7, snapshot: names.shuffled())
        #expect(parts.count >= 13, "5,000 x 167 bytes: at least 13 parts of 64 KB")
        var listed: [String] = []
        for (index, part) in parts.enumerated() {
            #expect(part.payload.count <= 65_536)
            #expect(part.sequence == 7 + UInt64(index))
            #expect(part.content == .snapshot(part: index + 1, parts: parts.count, channels: part.listedChannels))
            #expect(ClusterHeldReport(payload: part.payload, instance: "b") == part)
            listed += part.listedChannels
        }
        #expect(listed == names.sorted())
        // The parts are well used: a full part holds more than 60 KB.
        #expect(parts[0].payload.count > 60_000)

        let delta = ClusterHeldReport.messages(
            instance: "b", incarnation: "5f0c", socketID: nil, firstSequence: 20, added: names.prefix(3_000), removed: names.suffix(1_000))
        #expect(delta.allSatisfy { $0.payload.count <= 65_536 })
        var added: [String] = []
        var removed: [String] = []
        for message in delta {
            guard case .delta(let a, let r) = message.content else {
                Issue.record("not a delta: \(message)")
                continue
            }
            added += a
            removed += r
        }
        #expect(added == Array(names.prefix(3_000)).sorted() && removed == Array(names.suffix(1_000)).sorted())
        #expect(delta.map(\.sequence) == (0..<UInt64(delta.count)).map { 20 + $0 })

        let list = ClusterDiscoveredList.parts(rule: "devices", channels: names)
        #expect(list.count >= 13 && list.allSatisfy { $0.payload.count <= 65_536 })
        #expect(list[0].part == 0 && list[0].parts == list.count && list.dropFirst().allSatisfy { $0.parts == 0 })
    }

    @Test func payloadsRoundTripAndReadAsDocumented() {
        let delta = Self.report(8, .delta(added: ["c"], removed: ["a"]))
        #expect(
            String(decoding: delta.payload, as: UTF8.self) == #"{"instance":"b","incarnation":"x","seq":8,"added":["c"],"removed":["a"]}"#)
        let part = ClusterHeldReport(
            instance: "b", incarnation: "x", sequence: 3, socketID: "1.2", content: .snapshot(part: 2, parts: 2, channels: []))
        #expect(
            String(decoding: part.payload, as: UTF8.self)
                == #"{"instance":"b","incarnation":"x","seq":3,"socket_id":"1.2","part":2,"parts":2,"channels":[]}"#)
        for message in [delta, part] { #expect(ClusterHeldReport(payload: message.payload, instance: "b") == message) }
        let request = ClusterSnapshotRequest(instance: "b", incarnation: "x", from: "a")
        #expect(String(decoding: request.payload, as: UTF8.self) == #"{"instance":"b","incarnation":"x","from":"a"}"#)
        #expect(ClusterSnapshotRequest(payload: request.payload, instance: "b") == request)
        #expect(ClusterSnapshotRequest(payload: request.payload, instance: "a") == nil)
    }

    @Test(arguments: [
        #"{"instance":"b","incarnation":"x","seq":0,"part":1,"parts":1,"channels":[]}"#,
        #"{"instance":"b","incarnation":"x","part":1,"parts":1,"channels":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"part":2,"parts":1,"channels":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"part":0,"parts":1,"channels":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"channels":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"part":1,"parts":1,"channels":[],"added":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"added":["a"]}"#,
        #"{"instance":"b","incarnation":"x","seq":1,"added":[1],"removed":[]}"#,
        #"{"instance":"b","incarnation":"x","seq":-1,"added":[],"removed":[]}"#,
        #"{"instance":"b","incarnation":"","seq":1,"added":[],"removed":[]}"#,
    ])
    func badHeldPayloadsAreNoMessages(text: String) {
        #expect(ClusterHeldReport(payload: Array(text.utf8), instance: "b") == nil)
    }

    @Test(arguments: [
        "", "{}", #"{"rule":"r","channels":[]}"#, #"{"rule":"r","generation":"g","channels":[]}"#,
        #"{"rule":"r","generation":"g","parts":0,"channels":[]}"#, #"{"rule":"r","generation":"g","parts":10000,"channels":[]}"#,
        #"{"rule":"s","generation":"g","parts":1,"channels":[]}"#, #"{"rule":"r","generation":"","parts":1,"channels":[]}"#,
    ])
    func badDiscoveredHeadsAreNoParts(text: String) {
        #expect(ClusterDiscoveredList(payload: Array(text.utf8), rule: "r") == nil)
        #expect(ClusterSnapshotRequest(payload: Array(text.utf8), instance: "r") == nil)
    }

    @Test func aViewAppliesDeltasAfterASnapshotAndIgnoresDuplicates() {
        var view = ClusterHeldView(incarnation: "x")
        #expect(view.apply(Self.report(1, .snapshot(part: 1, parts: 2, channels: ["a", "b"]))) == .applied)
        #expect(!view.known, "half a snapshot")
        #expect(view.apply(Self.report(2, .snapshot(part: 2, parts: 2, channels: ["c"]))) == .applied)
        #expect(view.known && view.channels == ["a", "b", "c"])
        #expect(view.apply(Self.report(3, .delta(added: ["d"], removed: ["a"]))) == .applied)
        #expect(view.channels == ["b", "c", "d"])
        // QoS 1 redelivers: the same message again, and an older one, change nothing.
        #expect(view.apply(Self.report(3, .delta(added: ["d"], removed: ["a"]))) == .duplicate)
        #expect(view.apply(Self.report(2, .snapshot(part: 2, parts: 2, channels: ["c"]))) == .duplicate)
        #expect(view.known && view.channels == ["b", "c", "d"])
    }

    @Test func aLostDeltaMakesTheSetUnknownUntilTheNextSnapshot() {
        var view = ClusterHeldView(incarnation: "x")
        _ = view.apply(Self.report(1, .snapshot(part: 1, parts: 1, channels: ["a"])))
        // 2 is lost; 3 arrives.
        #expect(view.apply(Self.report(3, .delta(added: ["c"], removed: []))) == .gap)
        #expect(!view.known && view.channels == ["a"], "kept, but unknown")
        // 2 arrives late (reordered): too late, ignored; later deltas cannot heal.
        #expect(view.apply(Self.report(2, .delta(added: ["b"], removed: []))) == .duplicate)
        #expect(view.apply(Self.report(4, .delta(added: ["d"], removed: []))) == .gap)
        #expect(!view.known)
        // A snapshot heals; part 2 missing would not.
        #expect(view.apply(Self.report(5, .snapshot(part: 1, parts: 2, channels: ["a", "b"]))) == .applied)
        #expect(view.apply(Self.report(7, .snapshot(part: 2, parts: 2, channels: ["c"]))) == .gap)
        #expect(!view.known)
        #expect(view.apply(Self.report(8, .snapshot(part: 1, parts: 2, channels: ["a", "b"]))) == .applied)
        #expect(view.apply(Self.report(9, .snapshot(part: 2, parts: 2, channels: ["c", "d"]))) == .applied)
        #expect(view.known && view.channels == ["a", "b", "c", "d"])
    }

    @Test func aReceiverJoiningMidStreamWaitsForASnapshot() {
        var view = ClusterHeldView(incarnation: "x")
        #expect(view.apply(Self.report(41, .delta(added: ["c"], removed: []))) == .gap)
        #expect(view.apply(Self.report(42, .snapshot(part: 2, parts: 2, channels: ["c"]))) == .gap, "the second half of a snapshot")
        #expect(!view.known)
        #expect(view.apply(Self.report(43, .snapshot(part: 1, parts: 1, channels: ["c"]))) == .applied)
        #expect(view.known)
    }

    @Test func aLastLostMessageIsFoundThroughTheHeartbeats() {
        var view = ClusterHeldView(incarnation: "x")
        _ = view.apply(Self.report(1, .snapshot(part: 1, parts: 1, channels: ["a"])))
        let claims = [(1, false), (2, false), (2, true)].map { sequence, _ in view.heartbeat(heldSequence: UInt64(sequence)) }
        // 2 may still be on its way at the heartbeat that first claims it: one interval of grace.
        #expect(claims == [false, false, true], "2 never came")
        #expect(!view.known)
        _ = view.apply(Self.report(3, .snapshot(part: 1, parts: 1, channels: ["a", "b"])))
        let healed = [view.heartbeat(heldSequence: 3), view.heartbeat(heldSequence: 3)]
        #expect(healed == [false, false] && view.known)
    }

    @Test func anAssemblyTakesAListOnlyWhenEveryPartIsOfTheHeadsGeneration() {
        let old = ClusterDiscoveredList.parts(rule: "r", channels: Self.longNames(1_000))
        let new = ClusterDiscoveredList.parts(rule: "r", channels: Self.longNames(500))
        #expect(old.count == 3 && new.count == 2)
        var assembly = ClusterDiscoveredAssembly()
        for part in old.reversed() { assembly.received(part: part.part, part) }
        #expect(assembly.channels.map(Set.init) == Set(Self.longNames(1_000)))
        // The publisher writes part 1 first: until the head follows, the parts disagree.
        assembly.received(part: 1, new[1])
        #expect(assembly.channels == nil)
        assembly.received(part: 0, new[0])
        #expect(assembly.channels.map(Set.init) == Set(Self.longNames(500)))
        #expect(assembly.surplusParts(keeping: new.count) == [2])
        assembly.received(part: 2, nil)
        #expect(assembly.surplusParts(keeping: new.count).isEmpty)
        assembly.received(part: 0, nil)
        #expect(assembly.channels == [], "no head: no list")
    }

    /// A reader gets each complete list once: the parts of a list already taken, arriving again
    /// (a kept session's backlog, a republish), give nothing to join or compare.
    @Test func anAssemblyHandsOutEachGenerationOnce() {
        let old = ClusterDiscoveredList.parts(rule: "r", channels: Self.longNames(1_000))
        let new = ClusterDiscoveredList.parts(rule: "r", channels: Self.longNames(500))
        var assembly = ClusterDiscoveredAssembly()
        #expect(assembly.takeNewList() == [], "no head: the empty list, once")
        #expect(assembly.takeNewList() == nil)
        assembly.received(part: 0, old[0])
        #expect(assembly.takeNewList() == nil, "incomplete")
        for part in old.dropFirst() { assembly.received(part: part.part, part) }
        #expect(assembly.takeNewList().map(Set.init) == Set(Self.longNames(1_000)))
        for part in old { assembly.received(part: part.part, part) }
        #expect(assembly.takeNewList() == nil, "the same generation again")
        for part in new.reversed() { assembly.received(part: part.part, part) }
        #expect(assembly.takeNewList().map(Set.init) == Set(Self.longNames(500)))
        assembly.received(part: 0, nil)
        #expect(assembly.takeNewList() == [], "deleted")
    }
}
