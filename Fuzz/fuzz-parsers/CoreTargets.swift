import PusherProtocol

@testable import BridgeCore
@testable import PusherChannels
@testable import PusherLocal

/// Fuzz targets for BridgeCore's parsers: the config loader (TOML through toml++), rule
/// templates, topic filters and the trie, and the JSON validator (docs/contract.md §3–§5).
enum CoreTargets {
    // MARK: config

    /// Environment for `${VAR}` and `*_file`: fixed, no real file system.
    static let environment = ConfigEnvironment(
        variables: ["PUSHER_KEY": "key", "PUSHER_SECRET": "secret", "CREDENTIALS_DIRECTORY": "/run/credentials/x"],
        readFile: { path in path.hasSuffix("key") ? Array("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n".utf8) : Array("s3cret\n".utf8) },
        fileExists: { _ in true })

    /// The whole input is a `bridges.conf`. Checks: no abort (toml++ asserts on some inputs, see
    /// ConfigSourceMap); every diagnostic's line is inside the file; an accepted config's rule
    /// tables compile and `check` renders.
    static func config(_ input: Input) -> Int32 {
        // ConfigLoader.load refuses non-UTF-8 before parsing; do the same.
        guard let text = String(validating: input.bytes, as: UTF8.self) else { return 0 }
        let lineCount = text.utf8.count { $0 == 0x0A } + 1
        do {
            let configuration = try ConfigLoader.parse(text, file: "fuzz.conf", environment: environment)
            for bridge in configuration.bridges { _ = RuleTable(bridge: bridge) }
            _ = CheckReport.render(configuration, file: "fuzz.conf")
        } catch {
            for diagnostic in error.diagnostics {
                if let line = diagnostic.line, !(1...lineCount).contains(line) {
                    violated("diagnostic on line \(line) of a \(lineCount)-line file: \(diagnostic)")
                }
                if diagnostic.message.isEmpty { violated("empty diagnostic message") }
            }
        }
        return 0
    }

    // MARK: last-held

    /// The whole input is a `pusher_last_held` file (LastHeldRecord). Checks: every channel kept is
    /// a valid channel name with a time after 2000; lines kept + lines refused ≤ the lines given;
    /// what was kept renders and parses back the same, with no bad line.
    static func lastHeld(_ input: Input) -> Int32 {
        guard let text = String(validating: input.bytes, as: UTF8.self) else { return 0 }
        let (times, badLines) = LastHeldRecord.parse(text)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).count
        if times.count + badLines > lines { violated("\(times.count) kept + \(badLines) bad of \(lines) lines") }
        for (channel, time) in times {
            if let problem = ChannelName.problem(with: channel) { violated("kept \(channel.debugDescription): \(problem)") }
            if time.millisecondsSince1970 < 946_684_800_000 { violated("kept a time before 2000: \(time.millisecondsSince1970)") }
        }
        let again = LastHeldRecord.parse(LastHeldRecord.render(times))
        if again.times != times || again.badLines != 0 { violated("render/parse round trip changed \(times)") }
        return 0
    }

    // MARK: template

    /// Line 1 is a template, the next lines are placeholder values. Checks, for both rule
    /// directions: re-serialising the compiled segments parses to the same segments; with
    /// escaping, a rendered topic has exactly the template's literal `/`s (a value never adds a
    /// level, docs/contract.md §5.1) and no wildcard a literal did not have, and each level unescapes.
    static func template(_ input: Input) -> Int32 {
        let lines = input.lines
        guard let source = lines.first else { return 0 }
        let values: [Substring] = lines.dropFirst().prefix(8).map { Substring($0) } + Array(repeating: Substring("v"), count: 8)
        let contexts: [NameTemplate.Context] = [
            .pusherEvent, .discoveredPusherEvent, .mqttMessage(captures: 3, multiLevel: true),
            .mqttMessage(captures: 0, multiLevel: false),
        ]
        for context in contexts {
            guard case .success(let template) = NameTemplate.parse(source, context: context) else { continue }
            let rewritten = serialise(template.segments)
            guard case .success(let again) = NameTemplate.parse(rewritten, context: context) else {
                violated("re-serialised template \(rewritten.debugDescription) of \(source.debugDescription) is refused")
            }
            if again.segments != template.segments {
                violated("template \(source.debugDescription) re-serialised as \(rewritten.debugDescription) compiles differently")
            }
            let templateValues = TemplateValues(
                captures: Array(values[0..<3]), multiLevel: values[3], topic: values[4], channel: values[5], event: values[6],
                userID: values[7], bridge: "b", suffix: values[0])
            if template.readsPayload {
                // `{}` has no scalar at any pointer: the first `{json:…}` must be the gap.
                var output = ""
                var document: PayloadDocument? = PayloadDocument(Array("{}".utf8))
                let gap = template.render(into: &output, values: templateValues, payload: &document, escapingLevels: true)
                guard case .jsonValue = gap else {
                    violated("template \(source.debugDescription) rendered {json:…} from {}: \(String(describing: gap))")
                }
                continue
            }
            guard let escaped = template.render(templateValues, escapingLevels: true) else {
                violated("template \(source.debugDescription) has every value but does not render")
            }
            let literal = template.literalText
            for byte in [UInt8(ascii: "/"), UInt8(ascii: "+"), UInt8(ascii: "#")] {
                let inLiteral = literal.utf8.count { $0 == byte }
                let inOutput = escaped.utf8.count { $0 == byte }
                if inOutput != inLiteral {
                    violated(
                        "rendering \(source.debugDescription) gave \(inOutput) '\(UnicodeScalar(byte))' for the literal's \(inLiteral): \(escaped.debugDescription)"
                    )
                }
            }
            guard let plain = template.render(templateValues, escapingLevels: false) else {
                violated("template \(source.debugDescription) renders escaped but not plain")
            }
            if plain.utf8.count > escaped.utf8.count { violated("escaping shortened \(plain.debugDescription)") }
        }
        return 0
    }

    /// The template text of `segments` (literal braces doubled).
    static func serialise(_ segments: [NameTemplate.Segment]) -> String {
        var out = ""
        for segment in segments {
            switch segment {
            case .literal(let text):
                for character in text {
                    if character == "{" { out += "{{" } else if character == "}" { out += "}}" } else { out.append(character) }
                }
            case .capture(let number): out += "{\(number)}"
            case .multiLevel: out += "{#}"
            case .topic: out += "{topic}"
            case .channel: out += "{channel}"
            case .event: out += "{event}"
            case .userID: out += "{user_id}"
            case .bridge: out += "{bridge}"
            case .suffix: out += "{suffix}"
            case .json(let pointer): out += "{json:\(pointer.source)}"
            }
        }
        return out
    }

    // MARK: topic

    /// Lines up to the first empty line are filters, the rest are topics. Checks: the trie, the
    /// filters' own matcher and an independent reference (MQTT §4.7) agree on which rules match,
    /// with which `+` captures and `#` rest; level escaping round-trips and leaves no separator.
    static func topics(_ input: Input) -> Int32 {
        let lines = input.lines
        let split = lines.firstIndex(of: "") ?? lines.count
        let filters = lines[..<split].prefix(24).compactMap { try? TopicFilter.parse($0).get() }
        let topics = lines[min(split + 1, lines.count)...].prefix(24)
        var trie = TopicTrie()
        for (index, filter) in filters.enumerated() { trie.insert(filter, rule: index) }
        for topic in topics {
            let escaped = TopicLevelEscaping.escape(topic)
            if TopicLevelEscaping.unescape(escaped).map({ $0.utf8.elementsEqual(topic.utf8) }) != true {
                violated("escaping \(topic.debugDescription) does not round-trip")
            }
            if escaped.utf8.contains(where: {
                $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 < 0x20 || $0 == 0x7F
            }) {
                violated("escaped level \(escaped.debugDescription) still has a separator, wildcard or control byte")
            }
            guard TopicName.problem(with: topic) == nil else { continue }
            var fromTrie: [String] = []
            trie.match(topic) { rule, captures, rest in
                fromTrie.append("\(rule)|\(captures.joined(separator: "\u{1}"))|\(rest.map { "=" + $0 } ?? "nil")")
            }
            var fromReference: [String] = []
            var fromFilter: [String] = []
            for (index, filter) in filters.enumerated() {
                if let match = reference(filter: filter.text, topic: topic) {
                    fromReference.append("\(index)|\(match.captures.joined(separator: "\u{1}"))|\(match.rest.map { "=" + $0 } ?? "nil")")
                }
                if let match = filter.match(topic) {
                    fromFilter.append("\(index)|\(match.captures.joined(separator: "\u{1}"))|\(match.multiLevel.map { "=" + $0 } ?? "nil")")
                }
            }
            if !sameBytes(fromTrie, fromReference) {
                violated(
                    "topic \(topic.debugDescription), filters \(filters.map(\.text)): trie \(fromTrie.sorted()) vs reference \(fromReference.sorted())"
                )
            }
            if !sameBytes(fromFilter, fromReference) {
                violated(
                    "topic \(topic.debugDescription), filters \(filters.map(\.text)): TopicFilter.match \(fromFilter.sorted()) vs reference \(fromReference.sorted())"
                )
            }
        }
        return 0
    }

    /// MQTT §4.7 written out plainly, level by level, on the UTF-8 bytes as a broker sees them
    /// (split at every `/` byte, compared byte for byte), independent of TopicFilter and the trie.
    static func reference(filter: String, topic: String) -> (captures: [String], rest: String?)? {
        let slash = UInt8(ascii: "/")
        let f = Array(filter.utf8).split(separator: slash, omittingEmptySubsequences: false).map(Array.init)
        let t = Array(topic.utf8).split(separator: slash, omittingEmptySubsequences: false).map(Array.init)
        let plus = [UInt8(ascii: "+")], hash = [UInt8(ascii: "#")]
        // §4.7.2: a leading wildcard does not match a topic starting with '$'.
        if topic.utf8.first == UInt8(ascii: "$"), f[0] == plus || f[0] == hash { return nil }
        func text(_ levels: ArraySlice<[UInt8]>) -> String {
            String(decoding: Array(levels.joined(separator: [slash])), as: UTF8.self)
        }
        var captures: [String] = []
        for i in 0..<f.count {
            if f[i] == hash { return (captures, text(t[min(i, t.count)...])) }
            if i >= t.count { return nil }
            if f[i] == plus {
                captures.append(text(t[i...i]))
            } else if f[i] != t[i] {
                return nil
            }
        }
        return f.count == t.count ? (captures, nil) : nil
    }

    /// Match lists compared as bytes: `String`'s `==` would call canonically equivalent but
    /// different bytes equal.
    static func sameBytes(_ a: [String], _ b: [String]) -> Bool {
        a.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
            == b.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    // MARK: json

    /// The input as a JSON document. Checks: the shared tokenizer (`PusherProtocol.JSONTokenizer`)
    /// and its three views — BridgeCore's validator, pusher-local's parser, the client's scanner —
    /// give the same verdict on every input, nesting limit included; the tokenizer's tokens lie
    /// inside the input, in order, never deeper than the limit; a parsed value re-encodes to text
    /// that parses to the same value and is valid; the client's scanner reads every valid object
    /// and array with the same keys and string values as pusher-local's parser.
    static func json(_ input: Input) -> Int32 {
        let tokenizerError = tokenizerCheck(input.bytes)
        let valid = tokenizerError == nil
        let bridge = BridgeCore.JSONText.isValid(input.bytes)
        var parsed: JSONValue?
        var parseError: JSONParseError?
        do {
            parsed = try JSONValue.parse(input.bytes)
        } catch {
            parseError = error
        }
        let scanned = (try? JSONScanner.document(input.bytes)) != nil
        if bridge != valid || (parsed != nil) != valid || scanned != valid {
            violated(
                "the tokenizer says \(tokenizerError.map { "\($0)" } ?? "valid"), BridgeCore's validator \(bridge), "
                    + "pusher-local's parser \(parsed.map { "\($0)" } ?? "fails"), the client's scanner \(scanned) "
                    + "for \(input.text.debugDescription)")
        }
        if let tokenizerError, let parseError, tokenizerError.offset != parseError.offset || tokenizerError.message != parseError.message {
            violated("pusher-local's parser reports \(parseError), the tokenizer \(tokenizerError)")
        }
        guard let parsed else { return 0 }
        let encoded = parsed.encoded
        guard let again = try? JSONValue.parse(encoded), again == parsed else {
            violated("re-encoding \(input.text.debugDescription) as \(encoded.debugDescription) changes it")
        }
        if !BridgeCore.JSONText.isValid(encoded) { violated("re-encoded \(encoded.debugDescription) is not valid") }
        let text = input.text
        switch parsed {
        case .object(let members):
            guard let scanned = try? JSONScanner.objectMembers(of: text) else {
                violated("the client's scanner rejects the object \(text.debugDescription)")
            }
            if scanned.map(\.key) != members.map(\.key) { violated("the client's scanner reads other keys from \(text.debugDescription)") }
            for (member, (_, value)) in zip(members, scanned) {
                if case .string(let s) = member.value, value != .string(s) { violated("the client's scanner reads \(value) for \(member)") }
            }
        case .array(let items):
            guard let scanned = try? JSONScanner.arrayElements(of: text) else {
                violated("the client's scanner rejects the array \(text.debugDescription)")
            }
            if scanned.count != items.count { violated("the client's scanner reads \(scanned.count) elements from \(items.count)") }
        default:
            break
        }
        return 0
    }

    /// Walks `bytes` with the tokenizer, checking every token's range and the depth; the error, if
    /// the bytes are not one JSON document.
    static func tokenizerCheck(_ bytes: [UInt8]) -> JSONSyntaxError? {
        do {
            try JSONTokenizer.withTokenizer(over: bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                var end = 0
                while let token = try tokenizer.next() {
                    if token.range.lowerBound < end || token.range.upperBound > bytes.count || token.range.isEmpty {
                        violated("token \(token) out of order or outside the \(bytes.count) bytes")
                    }
                    if tokenizer.depth > JSONTokenizer.maximumDepth { violated("depth \(tokenizer.depth) past the limit") }
                    if token.kind == .string || token.kind == .memberName {
                        // A decoded string written back out reads as the same string.
                        let value = tokenizer.string(of: token)
                        guard case .string(let again)? = try? JSONValue.parse(JSONString.quoted(value)), again == value else {
                            violated("the string \(tokenizer.text(of: token.range).debugDescription) does not round-trip")
                        }
                    }
                    end = token.range.upperBound
                }
            }
            return nil
        } catch {
            if error.offset < 0 || error.offset > bytes.count { violated("error \(error) outside the \(bytes.count) bytes") }
            return error
        }
    }
}
