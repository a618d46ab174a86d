import Testing

@testable import BridgeCore

@Suite("Payload: JSON pointer syntax (RFC 6901)")
struct PayloadPointerSyntaxTests {
    private func tokens(_ text: String) throws -> [String] {
        try JSONPointer.parse(text).get().tokens
    }

    private func syntaxError(_ text: String) -> PayloadSyntaxError? {
        guard case .failure(let error) = JSONPointer.parse(text) else { return nil }
        return error
    }

    @Test func theEmptyPointerIsTheWholeDocument() throws {
        let pointer = try JSONPointer.parse("").get()
        #expect(pointer.tokens == [])
        #expect(pointer.source == "")
        #expect(pointer.description == "")
    }

    @Test(arguments: [
        ("/", [""]), ("//", ["", ""]), ("/foo", ["foo"]), ("/foo/0", ["foo", "0"]), ("/a~1b", ["a/b"]), ("/m~0n", ["m~n"]),
        ("/c%d", ["c%d"]), ("/e^f", ["e^f"]), ("/g|h", ["g|h"]), ("/i\\j", ["i\\j"]), ("/k\"l", ["k\"l"]), ("/ ", [" "]),
        ("/~01", ["~1"]), ("/~10", ["/0"]), ("/~0~1", ["~/"]), ("/a/", ["a", ""]), ("/é/日本", ["é", "日本"]),
    ])
    func tokensAreUnescaped(_ text: String, _ expected: [String]) throws {
        #expect(try tokens(text) == expected)
        #expect(try JSONPointer.parse(text).get().source == text)
    }

    @Test func escapesDecodeTilde1BeforeTilde0() throws {
        // RFC 6901 §4: "~01" is "~1", never "/".
        #expect(try tokens("/~01") == ["~1"])
        #expect(try tokens("/~0~1") != ["~1"])
    }

    @Test(arguments: [
        ("/~2", 2), ("/a~", 3), ("~", 1), ("a", 1), ("foo/bar", 1), ("/a/b~x/c", 5), ("/é~", 3), ("/~", 2), ("/~~0", 2), (" /a", 1),
    ])
    func badPointersAreRefusedWithTheirColumn(_ text: String, _ column: Int) throws {
        let error = try #require(syntaxError(text))
        #expect(error.column == column, "\(error)")
        #expect(error.description == "\(error.message) at column \(column)")
    }

    @Test func errorMessagesSayWhatIsWrong() throws {
        #expect(try #require(syntaxError("/a~2")).message.contains("'~2'"))
        #expect(try #require(syntaxError("/a~")).message.contains("at the end"))
        #expect(try #require(syntaxError("a")).message.contains("start with '/'"))
    }

    @Test func columnsCountCharactersNotBytes() throws {
        // "é" is two UTF-8 bytes and one Character; "e" + U+0301 is one Character of two scalars.
        #expect(try #require(syntaxError("/éé~3")).column == 4)
        #expect(try #require(syntaxError("/e\u{301}~3")).column == 3)
    }

    @Test func pointersAreEqualWhenWrittenAlike() throws {
        let a = try JSONPointer.parse("/a~1b").get()
        let b = try JSONPointer.parse("/a~1b").get()
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
        #expect(a != (try JSONPointer.parse("/a/b").get()))
    }

    @Test func arrayIndexesAreDigitsWithoutLeadingZero() throws {
        func index(_ text: String) throws -> Int? { try JSONPointer.parse(text).get().steps.first?.index }
        #expect(try index("/0") == 0)
        #expect(try index("/10") == 10)
        #expect(try index("/01") == nil)
        #expect(try index("/00") == nil)
        #expect(try index("/-") == nil)
        #expect(try index("/-1") == nil)
        #expect(try index("/1a") == nil)
        #expect(try index("/+1") == nil)
        #expect(try index("/") == nil)
        #expect(try index("/99999999999999999999999") == nil)
    }
}
