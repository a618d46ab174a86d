import PusherProtocol
import Testing

@testable import BridgeCore

@Suite("Payload: pointer lookups in a document")
struct PayloadDocumentTests {
    /// RFC 6901 §5's example document, as the RFC writes it.
    static let rfcExample = """
        {
           "foo": ["bar", "baz"],
           "": 0,
           "a/b": 1,
           "c%d": 2,
           "e^f": 3,
           "g|h": 4,
           "i\\\\j": 5,
           "k\\"l": 6,
           " ": 7,
           "m~n": 8
        }
        """

    private func value(_ pointer: String, in json: String) throws -> JSONPointerValue? {
        var document = PayloadDocument(Array(json.utf8))
        return document.value(at: try JSONPointer.parse(pointer).get())
    }

    @Test func rfc6901ExampleWholeDocument() throws {
        #expect(try value("", in: Self.rfcExample) == .object(Self.rfcExample))
    }

    @Test(arguments: [
        ("/foo", JSONPointerValue.array(#"["bar", "baz"]"#)), ("/foo/0", .string("bar")), ("/foo/1", .string("baz")),
        ("/", .number("0")), ("/a~1b", .number("1")), ("/c%d", .number("2")), ("/e^f", .number("3")), ("/g|h", .number("4")),
        ("/i\\j", .number("5")), ("/k\"l", .number("6")), ("/ ", .number("7")), ("/m~0n", .number("8")),
    ])
    func rfc6901ExamplePointers(_ pointer: String, _ expected: JSONPointerValue) throws {
        #expect(try value(pointer, in: Self.rfcExample) == expected)
    }

    @Test(arguments: ["/foo/2", "/foo/-", "/foo/01", "/foo/00", "/foo/-1", "/foo/a", "/foo/0/x", "/bar", "/a/b", "/m~1n", "//"])
    func rfc6901ExampleMissing(_ pointer: String) throws {
        #expect(try value(pointer, in: Self.rfcExample) == nil)
    }

    @Test func indexesOnObjectsAreMemberNames() throws {
        let json = #"{"0": "zero", "01": "oh-one", "-": "dash", "1": {"2": [10, 20, 30]}}"#
        #expect(try value("/0", in: json) == .string("zero"))
        #expect(try value("/01", in: json) == .string("oh-one"))
        #expect(try value("/-", in: json) == .string("dash"))
        #expect(try value("/1/2/2", in: json) == .number("30"))
        #expect(try value("/1/2/3", in: json) == nil)
    }

    @Test func arraysAtTheTopAndNested() throws {
        let json = #"[[1, [2, {"a": [3]}]], true, null, "s"]"#
        #expect(try value("/0/1/1/a/0", in: json) == .number("3"))
        #expect(try value("/1", in: json) == .bool(true))
        #expect(try value("/2", in: json) == .null)
        #expect(try value("/3", in: json) == .string("s"))
        #expect(try value("/4", in: json) == nil)
        #expect(try value("/-", in: json) == nil)
        #expect(try value("/0/1", in: json) == .array(#"[2, {"a": [3]}]"#))
        #expect(try value("/0/1/1", in: json) == .object(#"{"a": [3]}"#))
    }

    @Test func scalarsHaveNoMembers() throws {
        #expect(try value("/a", in: #""text""#) == nil)
        #expect(try value("/0", in: "42") == nil)
        #expect(try value("", in: "42") == .number("42"))
        #expect(try value("", in: " \"top\" ") == .string("top"))
        #expect(try value("/a/b", in: #"{"a": 1}"#) == nil)
        #expect(try value("/a/0", in: #"{"a": "xyz"}"#) == nil)
    }

    @Test func numbersAreKeptExactlyAsWritten() throws {
        let json = #"{"a": 1.50, "b": -0, "c": 1e3, "d": 1E+03, "e": -12.5e-1, "f": 123456789012345678901234567890}"#
        #expect(try value("/a", in: json) == .number("1.50"))
        #expect(try value("/b", in: json) == .number("-0"))
        #expect(try value("/c", in: json) == .number("1e3"))
        #expect(try value("/d", in: json) == .number("1E+03"))
        #expect(try value("/e", in: json) == .number("-12.5e-1"))
        #expect(try value("/f", in: json) == .number("123456789012345678901234567890"))
    }

    @Test func stringsAreUnescaped() throws {
        let json = #"{"s": "a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0000", "plain": "日本"}"#
        #expect(try value("/s", in: json) == .string("a\"b\\c/d\n\té😀\u{0}"))
        #expect(try value("/plain", in: json) == .string("日本"))
    }

    @Test func escapedMemberNamesMatchTheirDecodedText() throws {
        let json = #"{"a\/b": 1, "\u00e9": 2, "\ud83d\ude00": 3, "tab\there": 4, "q\"": 5, "\u0041": 6}"#
        #expect(try value("/a~1b", in: json) == .number("1"))
        #expect(try value("/é", in: json) == .number("2"))
        #expect(try value("/😀", in: json) == .number("3"))
        #expect(try value("/tab\there", in: json) == .number("4"))
        #expect(try value("/q\"", in: json) == .number("5"))
        #expect(try value("/A", in: json) == .number("6"))
        #expect(try value("/a", in: json) == nil)
        #expect(try value("/\u{e8}", in: json) == nil)
    }

    @Test func memberNamesAreComparedByScalarsNotNormalised() throws {
        // "é" precomposed and "e" + U+0301 are canonically equivalent but different names.
        let json = "{\"\u{e9}\": 1, \"e\u{301}\": 2}"
        #expect(try value("/\u{e9}", in: json) == .number("1"))
        #expect(try value("/e\u{301}", in: json) == .number("2"))
    }

    @Test func theLastOfDuplicateMembersWins() throws {
        #expect(try value("/a", in: #"{"a": 1, "a": 2}"#) == .number("2"))
        #expect(try value("/a/x", in: #"{"a": {"x": 1}, "b": 0, "a": {"y": 2}}"#) == nil)
        #expect(try value("/a/y", in: #"{"a": {"x": 1}, "a": {"y": 2}}"#) == .number("2"))
        #expect(try value("/a/x", in: #"{"a": {"x": 1, "x": 3}, "a": {"x": 2, "x": 4}, "c": 5}"#) == .number("4"))
        #expect(try value("/a", in: #"{"a": 1, "b": {"a": 9}}"#) == .number("1"))
    }

    @Test(arguments: [
        #"{"a": 1} x"#, #"{"a": 1"#, #"{"a": 1,}"#, #"{"a": 01}"#, "", "   ", #"{"a": 1}{"#, #"{"a": "\ud800"}"#, "\u{FEFF}{\"a\": 1}",
        #"{"a": tru}"#, #"{"a": 1} , "#, "not json at all",
    ])
    func aPayloadThatIsNotJSONHasNoValues(_ text: String) throws {
        var document = PayloadDocument(Array(text.utf8))
        let found1 = try document.value(at: JSONPointer.parse("/a").get())
        #expect(found1 == nil)
        let found2 = try document.value(at: JSONPointer.parse("").get())
        #expect(found2 == nil)
        let found3 = document.isJSON()
        #expect(found3 == false)
    }

    @Test func invalidUTF8AnywhereMakesItNotJSON() throws {
        // The pointer's value comes before the bad byte: the whole document must still be valid.
        var document = PayloadDocument(Array(#"{"a": 1, "b": ""#.utf8) + [0xFF] + Array(#""}"#.utf8))
        let found4 = try document.value(at: JSONPointer.parse("/a").get())
        #expect(found4 == nil)
        let found5 = document.isJSON()
        #expect(found5 == false)
        var truncated = PayloadDocument(Array(#"{"a": 1, "b": [1, 2"#.utf8))
        let truncatedFound = try truncated.value(at: JSONPointer.parse("/a").get())
        #expect(truncatedFound == nil)
    }

    @Test func nestingLimitIsTheTokenizers() throws {
        let limit = JSONTokenizer.maximumDepth
        let deepest = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        let tooDeep = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        let path = String(repeating: "/0", count: limit - 1)
        #expect(try value(path, in: deepest) == .array("[]"))
        #expect(try value("", in: tooDeep) == nil)
        #expect(try value("/0", in: tooDeep) == nil)
        let deepThenValue = #"{"a": 1, "z": "# + tooDeep + "}"
        #expect(try value("/a", in: deepThenValue) == nil)
    }

    @Test func isJSONAgreesWithLookups() throws {
        var valid = PayloadDocument(Array(#"{"a": [1]}"#.utf8))
        let validFound1 = valid.isJSON()
        #expect(validFound1)
        let validFound2 = try valid.value(at: JSONPointer.parse("/a/0").get())
        #expect(validFound2 == .number("1"))
        var lookedUpFirst = PayloadDocument(Array(#"{"a": [1]}"#.utf8))
        let lookedUpFound1 = try lookedUpFirst.value(at: JSONPointer.parse("/b").get())
        #expect(lookedUpFound1 == nil)
        let lookedUpFound2 = lookedUpFirst.isJSON()
        #expect(lookedUpFound2)
        var empty = PayloadDocument([])
        let emptyIsJSON = empty.isJSON()
        #expect(!emptyIsJSON)
    }

    @Test func repeatedLookupsGiveTheCachedValue() throws {
        var document = PayloadDocument(Array(#"{"a": "x", "b": [true]}"#.utf8))
        let a = try JSONPointer.parse("/a").get()
        let b = try JSONPointer.parse("/b/0").get()
        for _ in 0..<3 {
            let found6 = document.value(at: a)
            #expect(found6 == .string("x"))
            let found7 = document.value(at: b)
            #expect(found7 == .bool(true))
            let found8 = try document.value(at: JSONPointer.parse("/c").get())
            #expect(found8 == nil)
        }
    }

    @Test func templateAndProjectionTexts() {
        #expect(JSONPointerValue.string("a\"b").templateText == "a\"b")
        #expect(JSONPointerValue.number("1.50").templateText == "1.50")
        #expect(JSONPointerValue.bool(true).templateText == "true")
        #expect(JSONPointerValue.bool(false).templateText == "false")
        #expect(JSONPointerValue.null.templateText == nil)
        #expect(JSONPointerValue.object("{}").templateText == nil)
        #expect(JSONPointerValue.array("[1]").templateText == nil)
        #expect(JSONPointerValue.string("a\"b").projectionText == "a\"b")
        #expect(JSONPointerValue.number("-0").projectionText == "-0")
        #expect(JSONPointerValue.bool(false).projectionText == "false")
        #expect(JSONPointerValue.null.projectionText == "null")
        #expect(JSONPointerValue.object(#"{ "a" : 1 }"#).projectionText == #"{ "a" : 1 }"#)
        #expect(JSONPointerValue.array("[1, 2]").projectionText == "[1, 2]")
    }

    @Test func projectionOfAnObjectKeepsItsTextExactly() throws {
        let json = #"{"reading": {"t" : 21.50 ,"u":"C"} }"#
        #expect(try value("/reading", in: json)?.projectionText == #"{"t" : 21.50 ,"u":"C"}"#)
    }

    @Test func prefetchFindsWhatSingleLookupsFind() throws {
        let json = #"{"a": {"b": [1, {"c": "x"}], "d": null}, "a": {"b": [2, {"c": "y"}]}, "e": true, "a/b": 3}"#
        let texts = ["", "/a", "/a/b", "/a/b/0", "/a/b/1/c", "/a/d", "/e", "/a~1b", "/a/b/2", "/e/x", "/a", "/nope"]
        let pointers = try texts.map { try JSONPointer.parse($0).get() }
        var together = PayloadDocument(Array(json.utf8))
        together.prefetch(pointers)
        for pointer in pointers {
            var alone = PayloadDocument(Array(json.utf8))
            let expected = alone.value(at: pointer)
            let found = together.value(at: pointer)
            #expect(found == expected, "\(pointer)")
        }
        let lastWins = together.value(at: pointers[4])
        #expect(lastWins == .string("y"))
        let dropped = together.value(at: pointers[5])
        #expect(dropped == nil)
    }

    @Test func prefetchOfManyPointersAndOfANonJSONPayload() throws {
        let json = "[" + (0..<100).map(String.init).joined(separator: ",") + "]"
        let pointers = try (0..<101).map { try JSONPointer.parse("/\($0)").get() }
        var document = PayloadDocument(Array(json.utf8))
        document.prefetch(pointers)
        for (index, pointer) in pointers.enumerated() {
            let found = document.value(at: pointer)
            #expect(found == (index < 100 ? .number(String(index)) : nil))
        }
        var broken = PayloadDocument(Array((json + ",").utf8))
        broken.prefetch(pointers)
        let first = broken.value(at: pointers[0])
        #expect(first == nil)
        let isJSON = broken.isJSON()
        #expect(!isJSON)
    }
}
