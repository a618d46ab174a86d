import PusherProtocol
import Testing

@testable import PusherLocal

/// pusher-local's value tree as a view of `PusherProtocol.JSONTokenizer`.
struct JSONTreeTests {
    @Test func treesAreBuiltWithoutRecursionUpToTheLimit() throws {
        let limit = JSONTokenizer.maximumDepth
        let text = String(repeating: #"{"a":["#, count: limit / 2) + "7" + String(repeating: "]}", count: limit / 2)
        let value = try JSONValue.parse(text)
        #expect(value.encoded == text)
        var innermost = value
        while let next = innermost["a"] {
            guard case .array(let items) = next, let first = items.first else { break }
            innermost = first
        }
        #expect(innermost == .number("7"))
    }

    @Test func textAndBytesParseAlike() throws {
        let text = #" {"b":[1,"é",{"c":null}],"b":false} "#
        #expect(try JSONValue.parse(text) == JSONValue.parse(Array(text.utf8)))
        #expect(
            try JSONValue.parse(text)
                == .object([
                    JSONMember("b", .array([.number("1"), .string("é"), .object([JSONMember("c", .null)])])),
                    JSONMember("b", .bool(false)),
                ]))
    }

    @Test func errorsKeepTheTokenizersMessageAndOffset() {
        #expect(throws: JSONParseError(message: "expected ',' or ']'", offset: 3)) { try JSONValue.parse("[1 2]") }
        #expect(throws: JSONParseError(message: "nested deeper than 512 levels", offset: 512)) {
            try JSONValue.parse(String(repeating: "[", count: 100_000))
        }
        #expect(JSONParseError(message: "m", offset: 4).description == "invalid JSON at byte 4: m")
    }
}
