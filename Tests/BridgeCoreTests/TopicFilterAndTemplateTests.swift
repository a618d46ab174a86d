import Testing

@testable import BridgeCore

@Suite("Topic filters")
struct TopicFilterTests {
    @Test(
        arguments: [
            ("sensors/+/temperature", "sensors/kitchen/temperature", ["kitchen"], nil),
            ("sensors/#", "sensors", [], ""),
            ("sensors/#", "sensors/a/b", [], "a/b"),
            ("+/+", "/x", ["", "x"], nil),
            ("#", "a/b/c", [], "a/b/c"),
            ("a/+/#", "a/b", ["b"], ""),
        ] as [(String, String, [String], String?)])
    func matches(filter: String, topic: String, captures: [String], multiLevel: String?) throws {
        let parsed = try TopicFilter.parse(filter).get()
        let match = try #require(parsed.match(topic))
        #expect(match.captures == captures)
        #expect(match.multiLevel == multiLevel)
    }

    @Test(arguments: [
        ("sensors/+/temperature", "sensors/kitchen/humidity"),
        ("sensors/+/temperature", "sensors/kitchen/temperature/x"),
        ("sensors/+", "sensors"),
        ("#", "$SYS/broker/load"),
        ("+/broker", "$SYS/broker"),
    ])
    func doesNotMatch(filter: String, topic: String) throws {
        #expect(try TopicFilter.parse(filter).get().match(topic) == nil)
    }

    @Test func dollarTopicsMatchLiteralFirstLevel() throws {
        #expect(try TopicFilter.parse("$SYS/#").get().match("$SYS/broker") != nil)
    }

    @Test(arguments: ["", "a/#/b", "a/b#", "a+/b", "sport/tennis#"])
    func invalidFilters(_ filter: String) {
        #expect(throws: ConfigValueProblem.self) { try TopicFilter.parse(filter).get() }
    }

    /// The `topic` fuzz target's find (CI run of issue 7): Swift splits and compares `String`s
    /// by grapheme cluster and canonical equivalence; MQTT splits at every `/` byte and compares
    /// bytes (§4.7.3). A combining mark after `/` or `$` must not glue levels together, and `é`
    /// (U+00E9) and `e` + U+0301 are different levels. Checked through the filter's matcher and
    /// the rule table's trie alike.
    @Test(
        arguments: [
            ("+/+", "a/\u{301}b", true, ["a", "\u{301}b"]),
            ("a/\u{301}b", "a/\u{301}b", true, []),
            ("#", "$\u{59C}", false, []),
            ("+", "$\u{59C}", false, []),
            ("$\u{59C}", "$\u{59C}", true, []),
            ("caf\u{E9}/+", "cafe\u{301}/x", false, []),
            ("cafe\u{301}/+", "cafe\u{301}/x", true, ["x"]),
            ("x/+/y", "x/\u{301}/y", true, ["\u{301}"]),
        ] as [(String, String, Bool, [String])])
    func levelsAreSplitAndComparedAsBytes(filter: String, topic: String, matches: Bool, captures: [String]) throws {
        let parsed = try TopicFilter.parse(filter).get()
        let match = parsed.match(topic)
        #expect((match != nil) == matches)
        #expect(match.map { $0.captures.map { Array($0.utf8) } } == (matches ? captures.map { Array($0.utf8) } : nil))
        var trie = TopicTrie()
        trie.insert(parsed, rule: 7)
        var fromTrie: [[[UInt8]]] = []
        trie.match(topic) { rule, captures, _ in
            #expect(rule == 7)
            fromTrie.append(captures.map { Array($0.utf8) })
        }
        #expect(fromTrie == (matches ? [captures.map { Array($0.utf8) }] : []))
    }

    @Test func filtersThatDifferOnlyInNormalisationAreDifferent() throws {
        let composed = try TopicFilter.parse("caf\u{E9}/#").get()
        let decomposed = try TopicFilter.parse("cafe\u{301}/#").get()
        #expect(composed.levels != decomposed.levels)
        #expect(Set([composed.levels[0], decomposed.levels[0]]).count == 2)
    }

    /// A `+` or `#` followed by a combining mark is still a wildcard byte inside a level.
    @Test(arguments: ["a/+\u{301}", "#\u{301}", "a/\u{301}#/b"])
    func wildcardsGluedToCombiningMarksAreRefused(_ filter: String) {
        #expect(throws: ConfigValueProblem.self) { try TopicFilter.parse(filter).get() }
    }

    @Test func mismatchIsExplained() throws {
        let filter = try TopicFilter.parse("sensors/+/temperature").get()
        #expect(filter.explain("sensors/kitchen/humidity") == .mismatch("level 3 is \"humidity\", the filter wants \"temperature\""))
        #expect(filter.explain("sensors/kitchen") == .mismatch("the topic has 2 levels, the filter needs 3"))
    }
}

@Suite("Templates and escaping")
struct TemplateTests {
    @Test(arguments: [
        ("a/b", "a%2Fb"),
        ("50%", "50%25"),
        ("c++", "c%2B%2B"),
        ("#1", "%231"),
        ("tab\there", "tab%09here"),
        ("del\u{7F}", "del%7F"),
        ("ünïcode ok", "ünïcode ok"),
        ("plain-level_1.2", "plain-level_1.2"),
    ])
    func escapesEachValueIntoOneLevel(_ raw: String, _ escaped: String) {
        #expect(TopicLevelEscaping.escape(raw) == escaped)
        #expect(TopicLevelEscaping.unescape(escaped) == raw)
    }

    @Test func unescapeRejectsBrokenPercentSequences() {
        #expect(TopicLevelEscaping.unescape("%2") == nil)
        #expect(TopicLevelEscaping.unescape("%zz") == nil)
        #expect(TopicLevelEscaping.unescape("%FF") == nil)
    }

    @Test func rendersPusherTopicWithEscaping() throws {
        let template = try NameTemplate.parse("dash/{channel}/{event}/{bridge}", context: .pusherEvent).get()
        let values = TemplateValues(channel: "private-a", event: "price/usd", bridge: "factory")
        #expect(template.render(values, escapingLevels: true) == "dash/private-a/price%2Fusd/factory")
    }

    @Test func missingUserIDRendersNothing() throws {
        let template = try NameTemplate.parse("chat/{user_id}", context: .pusherEvent).get()
        #expect(template.render(TemplateValues(channel: "c", event: "e", bridge: "b"), escapingLevels: true) == nil)
    }

    @Test func rendersCapturesWithoutEscapingForPusherNames() throws {
        let template = try NameTemplate.parse("{2}-{1}{{x}}", context: .mqttMessage(captures: 2, multiLevel: false)).get()
        #expect(template.render(TemplateValues(captures: ["a", "b"], bridge: "x"), escapingLevels: false) == "b-a{x}")
    }

    @Test(arguments: [
        ("sensor-{1", "unclosed '{' in \"sensor-{1\" (write '{{' for a literal brace)"),
        ("sensor-}", "unmatched '}' in \"sensor-}\" (write '}}' for a literal brace)"),
        ("{0}", "captures are numbered from {1}"),
        ("{3}", "{3} does not exist: the filter has only 2 '+' wildcards"),
        ("{event}", "{event} is only available in rules with from = \"pusher\"; here use {1}…{n}, {#}, {topic} or {bridge}"),
        ("{topc}", "unknown placeholder {topc} (did you mean {topic}?)"),
    ])
    func rejectsBadMQTTTemplates(_ source: String, _ message: String) {
        switch NameTemplate.parse(source, context: .mqttMessage(captures: 2, multiLevel: false)) {
        case .success: Issue.record("\(source) should not parse")
        case .failure(let problem): #expect(problem.description == message)
        }
    }

    @Test func rejectsCapturesInPusherTemplates() {
        switch NameTemplate.parse("x/{1}", context: .pusherEvent) {
        case .success: Issue.record("{1} should not parse in a pusher template")
        case .failure(let problem): #expect(problem.description.hasPrefix("{1} is only available in rules with from = \"mqtt\""))
        }
    }
}

@Suite("Config value syntax")
struct ConfigValueTests {
    @Test(arguments: [
        ("500ms", Duration.milliseconds(500)), ("30s", .seconds(30)), ("2m", .seconds(120)), ("1h", .seconds(3600)),
        ("1m30s", .seconds(90)), ("1.5s", .milliseconds(1500)), ("1m 30s", .seconds(90)), ("30 s", .seconds(30)),
    ])
    func durations(_ text: String, _ expected: Duration) throws {
        #expect(try ConfigValueSyntax.duration(text).get() == expected)
    }

    @Test(arguments: ["", "30", "s", "5 minutes", "-1s", "1s30"])
    func badDurations(_ text: String) {
        #expect(throws: ConfigValueProblem.self) { try ConfigValueSyntax.duration(text).get() }
    }

    @Test(arguments: [("64KiB", 65536), ("64MiB", 67_108_864), ("10KB", 10_000), ("512", 512), ("512B", 512), ("1GiB", 1_073_741_824)])
    func sizes(_ text: String, _ expected: Int) throws {
        #expect(try ConfigValueSyntax.size(text).get() == expected)
    }

    @Test func expansion() throws {
        #expect(try ConfigValueSyntax.expand("a${X}b${Y}", environment: ["X": "1", "Y": "2"]).get() == "a1b2")
        #expect(try ConfigValueSyntax.expand("$${X}", environment: [:]).get() == "${X}")
        #expect(try ConfigValueSyntax.expand("cost $5", environment: [:]).get() == "cost $5")
        #expect(try ConfigValueSyntax.expand("${D:-run/state}", environment: [:]).get() == "run/state")
        #expect(try ConfigValueSyntax.expand("${D:-run/state}", environment: ["D": ""]).get() == "run/state")
        #expect(try ConfigValueSyntax.expand("${D:-run/state}", environment: ["D": "/var/lib/x"]).get() == "/var/lib/x")
        #expect(try ConfigValueSyntax.expand("${D:-}", environment: [:]).get() == "")
        #expect(throws: ConfigValueProblem.self) { try ConfigValueSyntax.expand("${:-x}", environment: [:]).get() }
        #expect(throws: ConfigValueProblem.self) { try ConfigValueSyntax.expand("${NOPE}", environment: [:]).get() }
        #expect(throws: ConfigValueProblem.self) { try ConfigValueSyntax.expand("${X", environment: ["X": "1"]).get() }
    }

    @Test func timestampsAreRFC3339WithMilliseconds() {
        #expect(UTCTimestamp(millisecondsSince1970: 0).rfc3339 == "1970-01-01T00:00:00.000Z")
        #expect(UTCTimestamp(millisecondsSince1970: 951_782_400_007).rfc3339 == "2000-02-29T00:00:00.007Z")
        #expect(UTCTimestamp(millisecondsSince1970: 1_795_000_000_123).rfc3339 == "2026-11-18T11:06:40.123Z")
        #expect(UTCTimestamp(millisecondsSince1970: -1).rfc3339 == "1969-12-31T23:59:59.999Z")
    }

    @Test(arguments: [
        ("{\"a\":[1,2.5e3,true,null,\"x\\u00e9\"]}", true), ("42", true), (" \"s\" ", true), ("", false), ("{", false),
        ("{\"a\":}", false), ("01", false), ("[1,]", false), ("hello", false), ("\"\u{1}\"", false), ("21.5", true),
        // Surrogate escapes: a pair is a character; a lone one is refused like pusher-local and the
        // client refuse it (found by make fuzz, target json).
        ("\"\\ud83d\\ude00\"", true), ("\"\\udc00\"", false), ("\"\\ud83d\"", false), ("\"\\ud83dx\"", false),
        ("\"\\ud83d\\u0041\"", false), ("{\"a\":\"\\udc00\"}", false),
    ])
    func jsonValidation(_ text: String, _ valid: Bool) {
        #expect(JSONText.isValid(text) == valid)
    }

    @Test func deeplyNestedJSONIsRejectedWithoutExhaustingTheStack() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(!JSONText.isValid(deep))
        let fine = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(JSONText.isValid(fine))
    }

    @Test func jsonRejectsInvalidUTF8InsideStrings() {
        #expect(!JSONText.isValid([UInt8(ascii: "\""), 0xC3, UInt8(ascii: "\"")]))
        #expect(JSONText.isValid([UInt8(ascii: "\""), 0xC3, 0xA9, UInt8(ascii: "\"")]))
    }
}
