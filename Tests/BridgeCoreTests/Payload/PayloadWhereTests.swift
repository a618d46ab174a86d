import Testing

@testable import BridgeCore

@Suite("Payload: where expressions")
struct PayloadWhereTests {
    static let reading = #"""
        {"temperature": 31.5, "unit": "C", "ok": true, "bad": false, "none": null, "name": "b\u00e9ta",
         "count": 10, "tags": ["a", "b"], "meta": {"v": 1}, "zero": -0, "big": 1e3, "weird key": 1}
        """#

    private func check(_ expression: String, _ json: String = reading) throws -> Bool {
        let filter = try WhereExpression.parse(expression).get()
        var document = PayloadDocument(Array(json.utf8))
        return filter.matches(&document)
    }

    private func failure(_ expression: String) -> PayloadSyntaxError? {
        guard case .failure(let error) = WhereExpression.parse(expression) else { return nil }
        return error
    }

    @Test(arguments: [
        // numbers, numerically
        ("/temperature > 30", true), ("/temperature >= 31.5", true), ("/temperature < 31.5", false), ("/temperature <= 31.50", true),
        ("/temperature == 31.5", true), ("/temperature != 31.5", false), ("/count == 1e1", true), ("/count == 10.0", true),
        ("/big == 1000", true), ("/zero == 0", true), ("/count > -5", true), ("/count < 9", false),
        // strings, by scalars
        ("/unit == \"C\"", true), ("/unit != \"C\"", false), ("/unit < \"D\"", true), ("/unit > \"B\"", true), ("/unit >= \"C\"", true),
        ("/unit <= \"Ca\"", true), ("/unit < \"C\"", false), ("/name == \"b\\u00e9ta\"", true), ("/name == \"béta\"", true),
        ("/name == \"be\u{301}ta\"", false), ("/name > \"bz\"", true),
        // booleans and null: equal or unequal only
        ("/ok == true", true), ("/ok != true", false), ("/bad == false", true), ("/ok != false", true), ("/ok > false", false),
        ("/ok >= true", false), ("/none == null", true), ("/none != null", false), ("/none <= null", false),
        // different types: never equal, never ordered
        ("/temperature == \"31.5\"", false), ("/temperature != \"31.5\"", true), ("/unit == 1", false), ("/unit > 1", false),
        ("/ok == 1", false), ("/ok != 1", true), ("/none == false", false), ("/none != false", true), ("/none < 1", false),
        ("/tags == null", false), ("/tags != null", true), ("/meta == \"{}\"", false), ("/meta != 1", true), ("/meta > 0", false),
        // missing: every comparison false, != included
        ("/missing == 1", false), ("/missing != 1", false), ("/missing < 1", false), ("/missing >= 1", false),
        ("/missing != null", false), ("/tags/5 != \"a\"", false), ("/tags/0 == \"a\"", true), ("/meta/v == 1", true),
        // exists
        ("exists /none", true), ("exists /missing", false), ("exists /tags/1", true), ("exists /tags/-", false),
        ("not exists /missing", true),
    ])
    func termsFollowTheComparisonRules(_ expression: String, _ expected: Bool) throws {
        #expect(try check(expression) == expected, "\(expression)")
    }

    @Test func notBindsTighterThanAndThanOr() throws {
        // or: a or (b and c)
        #expect(try check("/ok == true or /ok == false and /ok == false"))
        #expect(try !check("(/ok == true or /ok == false) and /ok == false"))
        // not: (not a) and b
        #expect(try !check("not /ok == true and /ok == true"))
        #expect(try check("not (/ok == true and /ok == false)"))
        #expect(try check("not not /ok == true"))
        #expect(try check("/bad == true or not /bad == true"))
        #expect(try check("((/ok == true))"))
        #expect(try check("/ok==true and(/unit==\"C\")"))
        #expect(try check("/a == 1 or /b == 2 or /count == 10", Self.reading))
        #expect(try !check("/count == 10 and /unit == \"C\" and /ok == false"))
    }

    @Test func aPayloadThatIsNotJSONHasNoValues() throws {
        #expect(try !check("exists /a", "not json"))
        #expect(try !check("/a != 1", "{\"a\": 2} trailing"))
        #expect(try check("not exists /a", "{\"a\": 2"))
    }

    @Test func pointersInOrderOfFirstAppearance() throws {
        let filter = try WhereExpression.parse("/b == 1 or exists /a and /b != 2 or not /c~1d < 3").get()
        #expect(filter.pointers.map(\.source) == ["/b", "/a", "/c~1d"])
        #expect(filter.pointers[2].tokens == ["c/d"])
        #expect(filter.source == "/b == 1 or exists /a and /b != 2 or not /c~1d < 3")
        #expect(filter.description == filter.source)
    }

    @Test func explainNamesTheDecidingTermAndTheReadings() throws {
        let filter = try WhereExpression.parse("/temperature > 30 and /unit == \"F\" or exists /missing").get()
        var document = PayloadDocument(Array(Self.reading.utf8))
        let verdict = filter.explain(&document)
        #expect(!verdict.matches)
        #expect(verdict.decidingTerm == "exists /missing")
        #expect(
            verdict.readings == [
                PointerReading(pointer: try JSONPointer.parse("/temperature").get(), value: .number("31.5")),
                PointerReading(pointer: try JSONPointer.parse("/unit").get(), value: .string("C")),
                PointerReading(pointer: try JSONPointer.parse("/missing").get(), value: nil),
            ])
    }

    @Test func explainShortCircuits() throws {
        var document = PayloadDocument(Array(Self.reading.utf8))
        let and = try WhereExpression.parse("/temperature < 0 and /unit == \"C\"").get().explain(&document)
        #expect(
            and
                == WhereVerdict(
                    matches: false, decidingTerm: "/temperature < 0",
                    readings: [
                        PointerReading(pointer: try JSONPointer.parse("/temperature").get(), value: .number("31.5"))
                    ]))
        let or = try WhereExpression.parse("(/unit == \"C\") or /temperature < 0").get().explain(&document)
        #expect(or.matches)
        #expect(or.decidingTerm == "/unit == \"C\"")
        #expect(or.readings.count == 1)
        let negated = try WhereExpression.parse("not /unit==\"C\"").get().explain(&document)
        #expect(!negated.matches)
        #expect(negated.decidingTerm == "/unit==\"C\"")
        let allTrue = try WhereExpression.parse("/ok == true and /unit == \"C\" and /unit == \"C\"").get().explain(&document)
        #expect(allTrue.matches)
        #expect(allTrue.decidingTerm == "/unit == \"C\"")
        #expect(allTrue.readings.map(\.pointer.source) == ["/ok", "/unit"])
    }

    @Test func matchesAgreesWithExplain() throws {
        let expressions = [
            "/temperature > 30 and /unit == \"C\"", "not exists /none or /count < 3",
            "/tags/0 != \"a\" or (/ok == true and not /bad == true)",
        ]
        for text in expressions {
            let filter = try WhereExpression.parse(text).get()
            var document = PayloadDocument(Array(Self.reading.utf8))
            let matches = filter.matches(&document)
            #expect(filter.explain(&document).matches == matches, "\(text)")
        }
    }

    @Test func stringLiteralsUseJSONEscapes() throws {
        let json = #"{"s": "a\"b\\c\nd😀"}"#
        #expect(try check(#"/s == "a\"b\\c\nd\ud83d\ude00""#, json))
        #expect(try check(#"/s == "a\"b\\c\u000ad😀""#, json))
        #expect(try !check(#"/s == "a\"b\\c""#, json))
    }

    @Test(arguments: [
        ("", 1, "empty expression"), ("   ", 1, "empty expression"),
        ("/temperature 30", 14, "expected a comparison operator after /temperature"),
        ("/temperature > 30 AND /unit == \"C\"", 19, "unknown keyword 'AND' (keywords are lowercase)"),
        ("(/a == 1", 1, "unclosed '(' opened"), ("  ((/a == 1) or (/b == 2)", 3, "unclosed '(' opened"),
        ("/a == 1)", 8, "unexpected ')' without a matching '('"), ("/a ==", 6, "expected a literal"),
        ("/a == foo", 7, "expected a literal"), ("/a == TRUE", 7, "unknown keyword 'TRUE'"), ("/a = 1", 4, "'=' is not an operator"),
        ("/a ! 1", 4, "'!' is not an operator"), ("/a == 1 and", 12, "expected a term"),
        ("/a == 1 /b == 2", 9, "expected 'and', 'or' or the end"),
        ("(/a == 1 /b", 10, "expected 'and', 'or' or ')'"), ("exists a", 8, "expected a JSON pointer"),
        ("exists", 7, "expected a JSON pointer"),
        ("a == 1", 1, "expected a term"), ("1 == /a", 1, "expected a term"), ("/a~2 == 1", 3, "invalid escape '~2'"),
        ("/x == 1 or /a~ == 1", 14, "'~' at the end"), ("/a == 01", 7, "invalid number '01'"), ("/a == 1.", 7, "invalid number"),
        ("/a == +1", 7, "expected a literal"), ("/a == \"abc", 7, "unterminated string literal"),
        ("/a == \"a\\x\"", 9, "invalid string literal"), ("/é == \"\\ud800\"", 8, "invalid string literal: unpaired surrogate"),
        ("not", 4, "expected a term after 'not'"),
        ("()", 2, "expected a term after '('"), ("/a == 1 NOT", 9, "unknown keyword 'NOT'"),
        ("/a == 1 and or", 13, "expected a term after 'and'"),
        ("/a == \"tab\there\"", 11, "invalid string literal: control character"),
        ("/a == 1 exists /b", 9, "expected 'and', 'or' or the end after '1'"),
        ("exists /a == 1", 11, "expected 'and', 'or' or the end after '/a'"), ("/a == == 1", 7, "expected a literal"),
    ])
    func syntaxErrorsNameWhatWasExpectedAndTheColumn(_ text: String, _ column: Int, _ message: String) throws {
        let error = try #require(failure(text), "\(text) parsed")
        #expect(error.column == column, "\(text): \(error)")
        #expect(error.message.hasPrefix(message), "\(text): \(error)")
        #expect(error.column >= 1 && error.column <= text.count + 1)
    }

    @Test func theLeadsExampleMessagesReadWell() throws {
        #expect(failure("/temperature 30")?.description == "expected a comparison operator after /temperature at column 14")
        #expect(failure("(/a == 1")?.description == "unclosed '(' opened at column 1")
    }

    @Test func nestingIsLimited() throws {
        let limit = WhereExpression.maximumNesting
        let deepest = String(repeating: "(", count: limit) + "exists /a" + String(repeating: ")", count: limit)
        #expect(try check(deepest, #"{"a": 0}"#))
        let tooDeep = String(repeating: "(", count: limit + 1) + "exists /a" + String(repeating: ")", count: limit + 1)
        #expect(try #require(failure(tooDeep)).message.contains("nested deeper"))
        let nots = String(repeating: "not ", count: limit + 1) + "exists /a"
        #expect(try #require(failure(nots)).column == 4 * limit + 1)
        #expect(try check(String(repeating: "not ", count: limit) + "exists /a", #"{"a": 0}"#))
    }

    @Test func longChainsAreFlat() throws {
        // 2000 terms joined by `and` parse without deep recursion, and short-circuit.
        let chain = Array(repeating: "/a == 1", count: 2000).joined(separator: " and ")
        #expect(try check(chain, #"{"a": 1}"#))
        #expect(try !check(chain, #"{"a": 2}"#))
    }

    @Test func pointerKeysWithOperatorCharactersStopThePointer() throws {
        // "/a=b" reads as "/a" followed by "=": such keys cannot be addressed in `where`.
        #expect(failure("/a=b == 1") != nil)
        #expect(failure("/weird key == 1") != nil)
    }

    @Test func canonicalTextParsesToTheSameTree() throws {
        let texts = ["not /a == \"x\\ny\" and (exists /b or /c <= -1.5e3)", "/a != null or /b == true and not not /c > 0"]
        for text in texts {
            let filter = try WhereExpression.parse(text).get()
            let again = try WhereExpression.parse(filter.canonicalText).get()
            #expect(again.canonicalText == filter.canonicalText)
        }
    }
}
