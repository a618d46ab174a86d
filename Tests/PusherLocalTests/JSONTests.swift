import Testing

@testable import PusherLocal

struct JSONTests {
    @Test func parsesAndReencodesKeepingOrderAndNumbers() throws {
        let text = "{\"b\":1,\"a\":[true,false,null,-1.5e3,\"s\"],\"c\":{\"z\":{}}}"
        let value = try JSONValue.parse(text)
        #expect(value.encoded == text)
        #expect(value["b"] == .number("1"))
        #expect(value["missing"] == nil)
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        let value = try JSONValue.parse("\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\\/\"")
        #expect(value == .string("a\"b\\c\né😀/"))
        #expect(jsonQuoted("a\"b\\c\n\u{1}") == "\"a\\\"b\\\\c\\n\\u0001\"")
        #expect(try JSONValue.parse(jsonQuoted("x\u{7}\"\\y")) == .string("x\u{7}\"\\y"))
    }

    @Test(arguments: [
        "", "{", "{\"a\"}", "{\"a\":}", "[1,]", "tru", "01", "1.", "\"\\ud800\"", "\"\u{1}\"", "{} x", "\"abc", "-",
        "{\"a\":1,}", "\"\\q\"",
    ])
    func rejectsInvalidJSON(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test func reportsTheOffset() {
        #expect(throws: JSONParseError(message: "expected ':'", offset: 5)) { try JSONValue.parse("{\"a\" 1}") }
    }

    /// The limit is the project's one (`JSONTokenizer.maximumDepth`, 512; it was 64 before the
    /// three JSON readers shared one tokenizer).
    @Test func limitsNesting() throws {
        let deep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let ok = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        _ = try JSONValue.parse(ok)
    }

    @Test func rejectsInvalidUTF8InStrings() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
    }
}
