@testable import BridgeCore

/// The fuzz target for the split membership messages (docs/contract.md §7.4, "held reports" and
/// "discovery"): held snapshots and deltas with their sequence numbers, discovered-list parts.
enum ClusterPartTargets {
    /// Lines = messages: `held<TAB>PAYLOAD` (a held message of instance `b`, applied to one
    /// view), `heartbeat<TAB>N` (a heartbeat claiming held message N), `discovered/N<TAB>PAYLOAD`
    /// (part N of rule `r`'s list, 0 the head; an empty payload deletes it), `split<TAB>NAMES` (names
    /// separated by spaces, split as a snapshot, a delta and a discovered list). Checks: parsed
    /// messages re-encode to ones that parse equal; a view is known only after a complete snapshot
    /// and stays unknown after a hole until the next; an assembly's list is made of its head's
    /// generation; split messages stay within 64 KB and give back every name.
    static func parts(_ input: Input) -> Int32 {
        var view = ClusterHeldView(incarnation: "x")
        var assembly = ClusterDiscoveredAssembly()
        for line in input.text.split(separator: "\n", omittingEmptySubsequences: false) {
            let fields = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
            let payload = Array((fields.count > 1 ? fields[1] : "").utf8)
            switch fields[0] {
            case "held":
                guard let report = ClusterHeldReport(payload: payload, instance: "b") else { continue }
                if ClusterHeldReport(payload: report.payload, instance: "b") != report { violated("held round trip") }
                guard report.incarnation == "x" else { continue }
                let wasKnown = view.known
                let outcome = view.apply(report)
                if outcome == .gap, view.known { violated("known after a hole") }
                if view.known, !wasKnown, case .delta = report.content { violated("a delta made an unknown set known") }
            case "heartbeat":
                _ = view.heartbeat(heldSequence: UInt64(String(decoding: payload, as: UTF8.self)) ?? 0)
            case let kind where kind.hasPrefix("discovered/"):
                guard let part = Int(kind.dropFirst("discovered/".count)), part >= 0 else { continue }
                if payload.isEmpty {
                    assembly.received(part: part, nil)
                } else if let list = ClusterDiscoveredList(payload: payload, rule: "r", part: part) {
                    if ClusterDiscoveredList(payload: list.payload, rule: "r", part: part) != list { violated("part round trip") }
                    assembly.received(part: part, list)
                }
                if let channels = assembly.channels, let head = assembly.parts[0] {
                    if !channels.starts(with: head.channels) { violated("list does not start with the head") }
                }
            case "split":
                split(String(decoding: payload, as: UTF8.self).split(separator: " ").map(String.init))
            default: continue
            }
        }
        return 0
    }

    private static func split(_ names: [String]) {
        let unique = Set(names)
        let snapshot = ClusterHeldReport.messages(instance: "b", incarnation: "x", socketID: "1.2", firstSequence: 1, snapshot: unique)
        var listed: [String] = []
        for message in snapshot {
            if message.payload.count > ClusterPayload.maxBytes { violated("held part over 64 KB") }
            if ClusterHeldReport(payload: message.payload, instance: "b") != message { violated("split part round trip") }
            listed += message.listedChannels
        }
        if Set(listed) != unique || listed.count != unique.count { violated("snapshot parts lose or repeat names") }
        let delta = ClusterHeldReport.messages(
            instance: "b", incarnation: "x", socketID: nil, firstSequence: 1, added: unique, removed: ["gone"])
        if delta.contains(where: { $0.payload.count > ClusterPayload.maxBytes }) { violated("delta over 64 KB") }
        var view = ClusterHeldView(incarnation: "x")
        for message in snapshot { _ = view.apply(message) }
        if !view.known || view.channels != unique { violated("a whole snapshot does not give the set back") }
        var assembly = ClusterDiscoveredAssembly()
        for list in ClusterDiscoveredList.parts(rule: "r", channels: unique) {
            if list.payload.count > ClusterPayload.maxBytes { violated("discovered part over 64 KB") }
            assembly.received(part: list.part, list)
        }
        if assembly.channels.map(Set.init) != unique { violated("discovered parts do not give the list back") }
    }
}
