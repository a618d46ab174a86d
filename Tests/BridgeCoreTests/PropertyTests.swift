import PropertyBased
import Testing

@testable import BridgeCore

/// Properties checked on random input (x-sheep/swift-property-based).
@Suite("Properties")
struct PropertyTests {
    static let filterLevels = ["a", "b", "", "+", "$x"]
    static let topicLevels = ["a", "b", "", "$x", "c"]

    /// Filters built from a small alphabet so that random topics often match; a trailing `#` sometimes.
    static let filters = Gen.int(in: 0...4).array(of: 1...4).map { indices in
        let filter = indices.map { filterLevels[$0] }.joined(separator: "/")
        return filter.isEmpty ? "#" : filter  // "" is not a valid filter
    }
    static let filterSets = Gen.int(in: 0...5).array(of: 0...4).map { indices -> String in
        if indices.isEmpty { return "#" }
        let levels = indices.map { $0 == 5 ? "+" : filterLevels[$0 % 5] }
        return levels.joined(separator: "/") + (indices.count.isMultiple(of: 2) ? "/#" : "")
    }.array(of: 1...12)
    static let topics = Gen.int(in: 0...4).array(of: 1...5).map { indices in
        indices.map { topicLevels[$0] }.joined(separator: "/")
    }

    @Test func trieAgreesWithTheReferenceMatcher() async {
        await propertyCheck(count: 300, input: Self.filterSets, Self.topics.array(of: 1...10)) { filterTexts, topics in
            let filters = filterTexts.compactMap { try? TopicFilter.parse($0).get() }
            var trie = TopicTrie()
            for (index, filter) in filters.enumerated() { trie.insert(filter, rule: index) }
            for topic in topics {
                var fromTrie: [String] = []
                trie.match(topic) { rule, captures, multiLevel in
                    fromTrie.append("\(rule)|\(captures.joined(separator: ","))|\(multiLevel.map(String.init) ?? "nil")")
                }
                var reference: [String] = []
                for (index, filter) in filters.enumerated() {
                    if let match = filter.match(topic) {
                        reference.append("\(index)|\(match.captures.joined(separator: ","))|\(match.multiLevel ?? "nil")")
                    }
                }
                #expect(fromTrie.sorted() == reference.sorted(), "topic \(topic), filters \(filterTexts)")
            }
        }
    }

    static let anyText = Gen.int(in: 0...0x2FF).array(of: 0...24).map { codes in
        String(String.UnicodeScalarView(codes.compactMap { UnicodeScalar(UInt32($0)) }))
    }

    @Test func escapingRoundTripsAndLeavesNoSeparatorOrWildcard() async {
        await propertyCheck(count: 500, input: Self.anyText) { text in
            let escaped = TopicLevelEscaping.escape(text)
            #expect(TopicLevelEscaping.unescape(escaped) == text)
            #expect(
                !escaped.utf8.contains {
                    $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 < 0x20 || $0 == 0x7F
                })
        }
    }

    @Test func onePlaceholderNeverSpansTwoTopicLevels() async throws {
        let template = try NameTemplate.parse("x/{channel}/{event}{user_id}/{bridge}", context: .pusherEvent).get()
        await propertyCheck(count: 500, input: Self.anyText, Self.anyText, Self.anyText) { channel, event, userID in
            let values = TemplateValues(
                channel: Substring(channel), event: Substring(event), userID: Substring(userID), bridge: "b")
            guard let topic = template.render(values, escapingLevels: true) else {
                Issue.record("render failed")
                return
            }
            let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
            #expect(levels.count == 4)
            #expect(levels.count == 4 && TopicLevelEscaping.unescape(levels[1]) == channel)
            #expect(levels.count == 4 && TopicLevelEscaping.unescape(levels[2]) == event + userID)
        }
    }

    @Test func ruleTableRoutesLikeTheReferenceForManyRules() async throws {
        // The compiled table (trie + templates) against filter.match + naive rendering, per topic.
        await propertyCheck(count: 100, input: Self.filters.array(of: 1...20), Self.topics) { filterTexts, topic in
            var extra = ""
            for (index, text) in filterTexts.enumerated() {
                extra +=
                    "[[bridge.rule]]\nname = \"r\(index)\"\nfrom = \"mqtt\"\ntopic = \"\(text)\"\nchannel = \"c\(index)\"\nevent = \"e\"\nqos = 0\n"
            }
            guard let configuration = try? Fixture.parse(Fixture.config(extra: extra)), let bridge = configuration.bridges.first else {
                Issue.record("config with \(filterTexts) did not load")
                return
            }
            let routing = RuleTable(bridge: bridge).route(topic: topic, payload: [], qos: 0, retain: false, receivedAt: Fixture.time)
            let expected = bridge.mqttToPusherRules.filter { $0.filter.match(topic) != nil }.map(\.name)
            #expect(routing.events.map(\.rule) == expected)
        }
    }
}
