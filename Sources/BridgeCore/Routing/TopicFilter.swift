/// An MQTT topic filter as written in a rule (`sensors/+/temperature`, `home/#`).
///
/// MQTT 3.1.1 §4.7 / MQTT 5 §4.7: levels are separated by `/`; `+` matches exactly one level,
/// `#` matches the parent level and any number of levels below it and must be the last level;
/// both wildcards must occupy a whole level. Topics starting with `$` are not matched by a
/// filter that starts with a wildcard (§4.7.2). Levels are split and compared as bytes, as the
/// broker does (``MQTTTopicText``).
public struct TopicFilter: Sendable, Hashable, CustomStringConvertible {
    /// One level of a filter.
    public enum Level: Sendable, Hashable {
        /// A level that must be equal, byte for byte.
        case literal(String)
        /// `+`: any single level; its value becomes a capture `{1}…{n}`.
        case singleLevel
        /// `#`: this level and all below (also none); its value becomes `{#}`.
        case multiLevel

        public static func == (lhs: Level, rhs: Level) -> Bool {
            switch (lhs, rhs) {
            case (.literal(let a), .literal(let b)): MQTTTopicText.same(a, b)
            case (.singleLevel, .singleLevel), (.multiLevel, .multiLevel): true
            default: false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .literal(let text): hasher.combine(MQTTTopicText.Key(Substring(text)))
            case .singleLevel: hasher.combine(1 as UInt8)
            case .multiLevel: hasher.combine(2 as UInt8)
            }
        }
    }

    /// The filter as written.
    public let text: String
    /// The filter's levels in order.
    public let levels: [Level]

    /// How many `+` wildcards the filter has: templates may use `{1}` … `{n}`.
    public var singleLevelWildcards: Int { levels.count { $0 == .singleLevel } }
    /// Whether the filter ends in `#`: templates may use `{#}`.
    public var hasMultiLevelWildcard: Bool { levels.last == .multiLevel }

    public var description: String { text }

    /// Longest topic or filter MQTT can carry (a two-byte length prefix).
    public static let maximumLength = 65_535

    /// Parses and validates `text`; the problem names the offending level.
    public static func parse(_ text: String) -> Result<TopicFilter, ConfigValueProblem> {
        if text.isEmpty { return .failure(.init("a topic filter cannot be empty")) }
        if text.utf8.count > maximumLength {
            return .failure(.init("a topic filter is at most \(maximumLength) bytes"))
        }
        if text.utf8.contains(0) { return .failure(.init("a topic filter cannot contain a NUL character")) }
        let parts = MQTTTopicText.levels(text)
        var levels: [Level] = []
        for (index, part) in parts.enumerated() {
            switch Array(part.utf8) {
            case [UInt8(ascii: "+")]: levels.append(.singleLevel)
            case [UInt8(ascii: "#")]:
                guard index == parts.count - 1 else {
                    return .failure(.init("'#' must be the last level of a topic filter (\"\(text)\")"))
                }
                levels.append(.multiLevel)
            default:
                if MQTTTopicText.containsWildcard(part) {
                    return .failure(
                        .init("a wildcard must fill a whole level: level \(index + 1) of \"\(text)\" is \"\(part)\""))
                }
                levels.append(.literal(String(part)))
            }
        }
        return .success(TopicFilter(text: text, levels: levels))
    }

    private init(text: String, levels: [Level]) {
        self.text = text
        self.levels = levels
    }

    /// The reference matcher, level by level: `nil` when `topic` does not match, else the values
    /// of the `+` levels in order and what `#` matched (`""` when it matched only the parent).
    /// The rule table uses a trie instead; this one explains mismatches and checks the trie in tests.
    public func match(_ topic: String) -> (captures: [String], multiLevel: String?)? {
        if case .mismatch = explain(topic) { return nil }
        let topicLevels = MQTTTopicText.levels(topic)
        var captures: [String] = []
        for (index, level) in levels.enumerated() {
            switch level {
            case .literal: continue
            case .singleLevel: captures.append(String(topicLevels[index]))
            case .multiLevel:
                return (captures, topicLevels.dropFirst(index).joined(separator: "/"))
            }
        }
        return (captures, nil)
    }

    /// Whether `topic` matches, and if not, why — for `route` explanations.
    public func explain(_ topic: String) -> FilterMatch {
        let topicLevels = MQTTTopicText.levels(topic)
        if MQTTTopicText.isReserved(topic), levels.first == .singleLevel || levels.first == .multiLevel {
            return .mismatch("topics starting with '$' are not matched by a filter starting with a wildcard (MQTT §4.7.2)")
        }
        for (index, level) in levels.enumerated() {
            switch level {
            case .multiLevel:
                return .match
            case .singleLevel:
                if index >= topicLevels.count {
                    return .mismatch("the topic has \(topicLevels.count) levels, the filter needs at least \(index + 1)")
                }
            case .literal(let expected):
                if index >= topicLevels.count {
                    return .mismatch("the topic has \(topicLevels.count) levels, the filter needs \(levels.count)")
                }
                if !MQTTTopicText.same(topicLevels[index], expected) {
                    return .mismatch("level \(index + 1) is \"\(topicLevels[index])\", the filter wants \"\(expected)\"")
                }
            }
        }
        if topicLevels.count != levels.count {
            return .mismatch("the topic has \(topicLevels.count) levels, the filter has \(levels.count)")
        }
        return .match
    }
}

/// The outcome of matching one topic against one filter, with the reason when it fails.
public enum FilterMatch: Sendable, Hashable {
    /// The topic matches.
    case match
    /// The topic does not match, and why.
    case mismatch(String)
}

/// Why `topic` cannot be published to (a topic name, not a filter), or `nil` when it can.
public enum TopicName {
    /// MQTT §4.7.3: non-empty, no wildcards, no NUL, at most 65,535 bytes.
    public static func problem(with topic: some StringProtocol) -> String? {
        if topic.isEmpty { return "topic is empty" }
        if topic.utf8.count > TopicFilter.maximumLength { return "topic is longer than \(TopicFilter.maximumLength) bytes" }
        for byte in topic.utf8 {
            if byte == UInt8(ascii: "+") || byte == UInt8(ascii: "#") { return "topic contains a wildcard ('+' or '#')" }
            if byte == 0 { return "topic contains a NUL character" }
        }
        return nil
    }
}
