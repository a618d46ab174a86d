import Testing

@testable import PusherProtocol

@Suite struct JSONTokenizerTests {
    /// Every token of `text` as (kind, source text), or the error.
    static func tokens(_ text: String) throws(JSONSyntaxError) -> [(JSONToken.Kind, String)] {
        try JSONTokenizer.withTokenizer(over: text) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            var tokens: [(JSONToken.Kind, String)] = []
            while let token = try tokenizer.next() { tokens.append((token.kind, tokenizer.text(of: token.range))) }
            return tokens
        }
    }

    /// The next token, which the test knows is there.
    static func token(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> JSONToken {
        guard let token = try tokenizer.next() else { throw tokenizer.failure("no token left") }
        return token
    }

    static func error(_ text: String) -> JSONSyntaxError? {
        do {
            try JSONTokenizer.validate(Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test func tokensCarryTheirKindAndSourceText() throws {
        let tokens = try Self.tokens(#" {"a" : [1, -2.5e3, "x\n", true, false, null], "b":{}} "#)
        #expect(
            tokens.map(\.0) == [
                .beginObject, .memberName, .beginArray, .number, .number, .string, .true, .false, .null, .endArray,
                .memberName, .beginObject, .endObject, .endObject,
            ])
        #expect(tokens.map(\.1) == ["{", #""a""#, "[", "1", "-2.5e3", #""x\n""#, "true", "false", "null", "]", #""b""#, "{", "}", "}"])
    }

    @Test func scalarDocumentsAreOneToken() throws {
        #expect(try Self.tokens(" 42 ").map(\.0) == [.number])
        #expect(try Self.tokens(#""s""#).map(\.1) == [#""s""#])
    }

    @Test func nextReturnsNilAtTheEndAndStaysThere() throws {
        try JSONTokenizer.withTokenizer(over: "[] \n") { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            #expect(try tokenizer.next()?.kind == .beginArray)
            #expect(tokenizer.depth == 1)
            #expect(try tokenizer.next()?.kind == .endArray)
            #expect(tokenizer.depth == 0)
            #expect(try tokenizer.next() == nil)
            #expect(try tokenizer.next() == nil)
            #expect(tokenizer.offset == 4)
        }
    }

    @Test func stringsAreDecoded() throws {
        let text = #"["plain","é","a\"b\\c\/d\b\f\n\r\t","\u00e9\ud83d\ude00\u0000x"]"#
        let strings = try JSONTokenizer.withTokenizer(over: text) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            var strings: [(String, Bool)] = []
            _ = try Self.token(&tokenizer)
            while let token = try tokenizer.next(), token.kind == .string {
                strings.append((tokenizer.string(of: token), token.hasEscapes))
            }
            return strings
        }
        #expect(strings.map(\.0) == ["plain", "é", "a\"b\\c/d\u{8}\u{c}\n\r\t", "é😀\u{0}x"])
        #expect(strings.map(\.1) == [false, false, true, true])
    }

    @Test func memberNamesAreDecodedToo() throws {
        let name = try JSONTokenizer.withTokenizer(over: #"{"k\u00e9y":1}"#) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            _ = try tokenizer.next()
            let token = try Self.token(&tokenizer)
            #expect(token.kind == .memberName)
            return tokenizer.string(of: token)
        }
        #expect(name == "kéy")
    }

    @Test func skipValueChecksTheWholeValueAndReturnsItsText() throws {
        let raw = try JSONTokenizer.withTokenizer(over: #"{"d": {"k" : [1, {"x":"]"}]} , "e":2}"#) {
            (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            _ = try tokenizer.next()
            _ = try tokenizer.next()
            let first = try Self.token(&tokenizer)
            let text = tokenizer.text(of: try tokenizer.skipValue(startingWith: first))
            #expect(tokenizer.depth == 1)
            #expect(try tokenizer.next()?.kind == .memberName)
            return text
        }
        #expect(raw == #"{"k" : [1, {"x":"]"}]}"#)
        // Counting brackets would pass `{"a":{]}` as raw JSON; the tokenizer does not.
        #expect(throws: JSONSyntaxError(message: "expected a member name", offset: 6)) {
            try JSONTokenizer.withTokenizer(over: #"{"a":{]}"#) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                let first = try Self.token(&tokenizer)
                _ = try tokenizer.skipValue(startingWith: first)
            }
        }
    }

    @Test func skipValueOfAScalarIsItsToken() throws {
        let range = try JSONTokenizer.withTokenizer(over: "[ 12 ]") { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
            _ = try tokenizer.next()
            let token = try Self.token(&tokenizer)
            return try tokenizer.skipValue(startingWith: token)
        }
        #expect(range == 2..<4)
    }

    @Test func errorsSayWhatAndWhere() {
        #expect(Self.error(#"{"a" 1}"#) == JSONSyntaxError(message: "expected ':'", offset: 5))
        #expect(Self.error("[1,]") == JSONSyntaxError(message: "unexpected character", offset: 3))
        #expect(Self.error("") == JSONSyntaxError(message: "unexpected end of input", offset: 0))
        #expect(Self.error("{} x") == JSONSyntaxError(message: "unexpected data after the value", offset: 3))
        #expect(Self.error("[02]") == JSONSyntaxError(message: "expected ',' or ']'", offset: 2))
        #expect(Self.error("+2") == JSONSyntaxError(message: "unexpected character", offset: 0))
        #expect(Self.error("1.") == JSONSyntaxError(message: "invalid number", offset: 0))
        #expect(Self.error("nul") == JSONSyntaxError(message: "invalid literal", offset: 0))
        #expect(Self.error(#""\ud800""#) == JSONSyntaxError(message: "unpaired surrogate", offset: 1))
        #expect(Self.error("\"a\u{1}\"") == JSONSyntaxError(message: "control character in string", offset: 2))
        #expect(Self.error("[1 2]") == JSONSyntaxError(message: "expected ',' or ']'", offset: 3))
        #expect(Self.error(#"{"a":1,}"#) == JSONSyntaxError(message: "expected a member name", offset: 7))
        #expect(JSONSyntaxError(message: "m", offset: 3).description == "m at byte 3")
    }

    @Test func invalidUTF8IsReportedWhereItStarts() {
        #expect(throws: JSONSyntaxError(message: "string is not valid UTF-8", offset: 2)) {
            try JSONTokenizer.validate([0x22, 0x61, 0xC0, 0xAF, 0x22])
        }
    }

    @Test func nestingPastTheLimitIsReportedAtTheBracket() {
        let limit = JSONTokenizer.maximumDepth
        let deep = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        #expect(Self.error(deep) == JSONSyntaxError(message: "nested deeper than \(limit) levels", offset: limit))
        #expect(limit == 512)
    }

    @Test func bytesWithoutContiguousStorageAreCopied() {
        let bytes = Array(#"{"a":[1]}"#.utf8).lazy.map { $0 }
        #expect(JSONTokenizer.isValid(bytes))
        #expect(!JSONTokenizer.isValid(Array("[1,]".utf8).lazy.map { $0 }))
    }

    @Test func containerStackKeepsEveryLevelsKind() {
        var stack = ContainerStack()
        #expect(!stack.topIsObject)
        let kinds = (0..<JSONTokenizer.maximumDepth).map { $0 % 3 == 0 || $0 % 7 == 0 }
        for isObject in kinds {
            stack.push(isObject: isObject)
            #expect(stack.topIsObject == isObject)
        }
        #expect(stack.count == JSONTokenizer.maximumDepth)
        for isObject in kinds.reversed() {
            #expect(stack.topIsObject == isObject)
            stack.pop()
        }
        #expect(stack.count == 0)
    }
}
