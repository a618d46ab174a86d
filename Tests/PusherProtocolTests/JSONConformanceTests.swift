import Testing

@testable import BridgeCore
@testable import PusherChannels
@testable import PusherLocal
@testable import PusherProtocol

/// One input of the conformance table and the verdict every JSON reader in the project must give.
struct JSONConformanceCase: Sendable, CustomTestStringConvertible {
    /// What the input shows.
    let name: String
    /// The input.
    let bytes: [UInt8]
    /// Whether it is one JSON document.
    let valid: Bool

    var testDescription: String { "\(valid ? "valid" : "invalid"): \(name)" }

    static func valid(_ text: String, _ name: String? = nil) -> Self { Self(name: name ?? text, bytes: Array(text.utf8), valid: true) }
    static func invalid(_ text: String, _ name: String? = nil) -> Self { Self(name: name ?? text, bytes: Array(text.utf8), valid: false) }
    static func bytes(_ bytes: [UInt8], _ valid: Bool, _ name: String) -> Self { Self(name: name, bytes: bytes, valid: valid) }

    /// `"` + `inner` + `"`.
    static func quoted(_ inner: [UInt8]) -> [UInt8] { [0x22] + inner + [0x22] }

    static func nestedArrays(_ depth: Int) -> String { String(repeating: "[", count: depth) + String(repeating: "]", count: depth) }
    static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
    }
    static func nestedMixed(_ depth: Int) -> String {
        let pairs = depth / 2
        return String(repeating: #"{"a":["#, count: pairs) + String(repeating: "]}", count: pairs)
    }

    /// The table: the tokenizer and each view must give these verdicts.
    static let table: [JSONConformanceCase] = {
        let limit = JSONTokenizer.maximumDepth
        return [
            // Values of every kind, and the whitespace all readers allow around them.
            .valid("{}"), .valid("[]"), .valid("0"), .valid("-0"), .valid("12"), .valid("1.5e3"), .valid("-1E-2"), .valid("2e+7"),
            .valid(#""s""#), .valid("true"), .valid("false"), .valid("null"), .valid(#"{"a":1,"a":2}"#, "repeated names"),
            .valid(" \t\n\r{\"a\":[1,{\"b\":null},\"x\"]} \r\n\t", "whitespace around and inside"),
            .valid(#"{"event":"x","data":{"a":{"b":[]}}}"#, "a frame with an object as data"),
            // Structure.
            .invalid("", "empty input"), .invalid(" \n\t", "whitespace only"), .invalid(#"{"a":{]}"#), .invalid("[1,]"),
            .invalid(#"{"a" 1}"#), .invalid(#"{"a":1,}"#), .invalid("[1,,2]"), .invalid("{,}"), .invalid(#"{"a"}"#),
            .invalid(#"{"a":}"#), .invalid("{1:2}"), .invalid("[1 2]"), .invalid(#"{"a":1 "b":2}"#), .invalid("[1]]"),
            .invalid("{"), .invalid("["), .invalid("]"), .invalid("'a'"), .invalid("/* c */ {}", "comments"),
            .invalid("{} x", "trailing garbage"), .invalid("1 2", "two values"), .invalid("{}{}", "two objects"),
            .bytes(Array("{}".utf8) + [0], false, "NUL after the value"),
            .bytes([0xEF, 0xBB, 0xBF] + Array("{}".utf8), false, "byte-order mark"),
            // Numbers (RFC 8259 §6).
            .invalid("02"), .invalid("-02"), .invalid("+2"), .invalid("1."), .invalid(".5"), .invalid("1e"), .invalid("1e+"),
            .invalid("-"), .invalid("NaN"), .invalid("Infinity"), .invalid("-Infinity"), .invalid("0x1"), .invalid("[01]"),
            // Literals.
            .invalid("truex"), .invalid("nul"), .invalid("tru"), .invalid("nullx"), .invalid("True"), .invalid("[fals]"),
            // Strings and escapes.
            .valid(#""a\"b\\c\/d\b\f\n\r\t""#, "every short escape"), .valid(#""\u00e9\u0000""#, "\\u escapes"),
            .invalid(#""abc"#, "unterminated string"), .invalid(#""\q""#, "unknown escape"), .invalid(#""\u12""#, "short \\u"),
            .invalid(#""\u12g4""#, "non-hex \\u"), .invalid("\"\\", "escape at the end"),
            .bytes(quoted([0x01]), false, "raw control character"), .bytes(quoted([0x0A]), false, "raw line feed"),
            // Surrogate escapes: a pair is one character, a lone one is refused.
            .valid(#""\ud83d\ude00""#, "surrogate pair"), .valid(#""\uD83D\uDE00""#, "upper-case surrogate pair"),
            .invalid(#""\ud800""#, "lone high surrogate"), .invalid(#""\udc00""#, "lone low surrogate"),
            .invalid(#""\ud83dx""#, "high surrogate then text"), .invalid(#""\ud83d\u0041""#, "high surrogate then non-surrogate"),
            .invalid(#""\ud83d\ud83d""#, "two high surrogates"), .invalid(#""\ude00\ud83d""#, "pair in the wrong order"),
            .invalid(#"{"a":"\udc00"}"#, "lone surrogate in a member"),
            // UTF-8: well-formed sequences only (Unicode Table 3-7).
            .bytes(quoted([0xC3, 0xA9]), true, "two-byte é"), .bytes(quoted([0xE2, 0x98, 0x83]), true, "three-byte ☃"),
            .bytes(quoted([0xF0, 0x9F, 0x98, 0x80]), true, "four-byte 😀"), .bytes(quoted([0xEF, 0xBF, 0xBF]), true, "U+FFFF"),
            .bytes(quoted([0xF4, 0x8F, 0xBF, 0xBF]), true, "U+10FFFF"),
            .bytes(quoted([0xFF]), false, "0xFF"), .bytes(quoted([0xC3]), false, "truncated sequence"),
            .bytes(quoted([0x80]), false, "lone continuation byte"), .bytes(quoted([0xC0, 0xAF]), false, "overlong two-byte /"),
            .bytes(quoted([0xC1, 0xBF]), false, "overlong two-byte"), .bytes(quoted([0xE0, 0x80, 0xAF]), false, "overlong three-byte"),
            .bytes(quoted([0xF0, 0x80, 0x80, 0xAF]), false, "overlong four-byte"),
            .bytes(quoted([0xED, 0xA0, 0x80]), false, "UTF-8-encoded surrogate"),
            .bytes(quoted([0xF4, 0x90, 0x80, 0x80]), false, "past U+10FFFF"), .bytes(quoted([0xF5, 0x80, 0x80, 0x80]), false, "0xF5"),
            .bytes(quoted([0xE2, 0x98]) + [0x22], false, "sequence cut by the quote"),
            .bytes([0xFF], false, "invalid UTF-8 outside a string"), .bytes(Array("[1]".utf8) + [0xC3, 0xA9], false, "é after the value"),
            .bytes(Array(#"{"a":"#.utf8) + quoted([0xFE]) + Array("}".utf8), false, "invalid UTF-8 in a member"),
            .bytes(quoted([0xFE]) + Array(":1".utf8), false, "invalid UTF-8 in a name position"),
            // The nesting limit: `limit` levels are accepted, `limit + 1` refused, and deep input costs no stack.
            .valid(nestedArrays(limit), "arrays at the limit"), .invalid(nestedArrays(limit + 1), "arrays past the limit"),
            .valid(nestedObjects(limit), "objects at the limit"), .invalid(nestedObjects(limit + 1), "objects past the limit"),
            .valid(nestedMixed(limit), "objects and arrays at the limit"),
            .invalid(nestedMixed(limit + 2), "objects and arrays past the limit"),
            .invalid(nestedArrays(100_000), "100 000 arrays deep"),
            .invalid(String(repeating: #"{"a":"#, count: 100_000), "100 000 objects deep, unclosed"),
            .invalid(String(repeating: "[", count: 1_000_000), "a million brackets"),
        ]
    }()
}

/// The shared conformance table, run against the tokenizer and each of its three views (the
/// client's frame scanner, pusher-local's value tree, the bridge's validator): all give the
/// table's verdict, so they agree with each other.
@Suite struct JSONConformanceTests {
    @Test(arguments: JSONConformanceCase.table)
    func theTokenizerGivesTheTablesVerdict(_ input: JSONConformanceCase) {
        #expect(JSONTokenizer.isValid(input.bytes) == input.valid)
        var tokens = 0
        let walked: Bool
        do {
            try JSONTokenizer.withTokenizer(over: input.bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                while try tokenizer.next() != nil { tokens += 1 }
            }
            walked = true
        } catch {
            walked = false
            #expect(error.offset >= 0 && error.offset <= input.bytes.count, "\(error)")
        }
        #expect(walked == input.valid)
        if let text = String(validating: input.bytes, as: UTF8.self) { #expect(JSONTokenizer.isValid(text) == input.valid) }
    }

    @Test(arguments: JSONConformanceCase.table)
    func theBridgesValidatorGivesTheTablesVerdict(_ input: JSONConformanceCase) {
        #expect(BridgeCore.JSONText.isValid(input.bytes) == input.valid)
        if let text = String(validating: input.bytes, as: UTF8.self) { #expect(BridgeCore.JSONText.isValid(text) == input.valid) }
    }

    @Test(arguments: JSONConformanceCase.table)
    func pusherLocalsParserGivesTheTablesVerdict(_ input: JSONConformanceCase) {
        #expect(((try? JSONValue.parse(input.bytes)) != nil) == input.valid)
        if let text = String(validating: input.bytes, as: UTF8.self) { #expect(((try? JSONValue.parse(text)) != nil) == input.valid) }
    }

    @Test(arguments: JSONConformanceCase.table)
    func theClientsScannerGivesTheTablesVerdict(_ input: JSONConformanceCase) {
        #expect(((try? JSONScanner.document(input.bytes)) != nil) == input.valid)
        // The entry points the client uses, for the objects and arrays of the table.
        guard let text = String(validating: input.bytes, as: UTF8.self),
            let first = input.bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D })
        else { return }
        if first == UInt8(ascii: "{") { #expect(((try? JSONScanner.objectMembers(of: text)) != nil) == input.valid) }
        if first == UInt8(ascii: "[") { #expect(((try? JSONScanner.arrayElements(of: text)) != nil) == input.valid) }
    }
}
