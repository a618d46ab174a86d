/// MQTT filters indexed level by level, so matching a topic costs O(levels × branching of the
/// filters that share its prefix) — independent of the number of rules (docs/contract.md §2 "fast").
///
/// Each node has literal children (keyed by the level's bytes), at most one `+` child, the rules
/// whose filter ends here, and the rules whose filter has `#` here. Matching walks literal and
/// `+` branches together, recording the `+` values as captures.
struct TopicTrie: Sendable {
    private struct Node: Sendable {
        var literal: [MQTTTopicText.Key: Int] = [:]
        var singleLevel: Int?
        var endingHere: [Int] = []
        var multiLevelHere: [Int] = []
    }

    private var nodes: [Node] = [Node()]

    init() {}

    /// Adds `filter` as rule number `rule`.
    mutating func insert(_ filter: TopicFilter, rule: Int) {
        var current = 0
        for level in filter.levels {
            switch level {
            case .literal(let text):
                let key = MQTTTopicText.Key(Substring(text))
                if let next = nodes[current].literal[key] {
                    current = next
                } else {
                    nodes.append(Node())
                    nodes[current].literal[key] = nodes.count - 1
                    current = nodes.count - 1
                }
            case .singleLevel:
                if let next = nodes[current].singleLevel {
                    current = next
                } else {
                    nodes.append(Node())
                    nodes[current].singleLevel = nodes.count - 1
                    current = nodes.count - 1
                }
            case .multiLevel:
                nodes[current].multiLevelHere.append(rule)
                return
            }
        }
        nodes[current].endingHere.append(rule)
    }

    /// Calls `body(rule, captures, multiLevel)` for every rule whose filter matches `topic`.
    /// `multiLevel` is what `#` matched (a slice of `topic`, empty when `#` matched only the
    /// parent level) or `nil` for filters without `#`. Rules are reported in no particular order.
    func match(_ topic: String, _ body: (Int, [Substring], Substring?) -> Void) {
        let levels = MQTTTopicText.levels(topic)
        // MQTT §4.7.2: wildcards at the first level do not match topics starting with '$'.
        let reserved = MQTTTopicText.isReserved(topic)
        var captures: [Substring] = []
        visit(0, depth: 0, levels: levels, topic: topic, reserved: reserved, captures: &captures, body)
    }

    private func visit(
        _ index: Int, depth: Int, levels: [Substring], topic: String, reserved: Bool, captures: inout [Substring],
        _ body: (Int, [Substring], Substring?) -> Void
    ) {
        let node = nodes[index]
        if !node.multiLevelHere.isEmpty, !(reserved && depth == 0) {
            let rest: Substring = depth < levels.count ? topic[levels[depth].startIndex...] : topic[topic.endIndex...]
            for rule in node.multiLevelHere { body(rule, captures, rest) }
        }
        guard depth < levels.count else {
            for rule in node.endingHere { body(rule, captures, nil) }
            return
        }
        let level = levels[depth]
        if let next = node.literal[MQTTTopicText.Key(level)] {
            visit(next, depth: depth + 1, levels: levels, topic: topic, reserved: reserved, captures: &captures, body)
        }
        if let next = node.singleLevel, !(reserved && depth == 0) {
            captures.append(level)
            visit(next, depth: depth + 1, levels: levels, topic: topic, reserved: reserved, captures: &captures, body)
            captures.removeLast()
        }
    }
}
