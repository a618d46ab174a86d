import Foundation
import PusherProtocol

@testable import BridgeCore

/// Fuzz targets for payload rules (docs/contract.md §7.3): `where` expressions and JSON pointer
/// lookups in payloads.
enum PayloadTargets {
    // MARK: where

    /// Documents every parsed expression is evaluated against (besides the input's own).
    static let documents: [String] = [
        #"{"a": 1, "b": "x", "c": true, "d": null, "e": [1, "2", {"f": 3}], "g": {"h": -0.5}, "": 0, "a~b": 2, "m": "~", "a": 1e0}"#,
        #"{"a": "1", "b": 2.5e1, "c": false, "d": [], "e": [null], "g": {"h": "é"}}"#,
        #"[1, "x", true, null]"#,
        #""text""#,
        "not json",
    ]

    /// The input up to its first NUL byte is a `where` expression, the rest one more document.
    ///
    /// Checks: a refused expression's column is within the text (1 … count + 1) and its message
    /// is not empty; an accepted one keeps its source, its fully parenthesised rewriting parses to
    /// the same rewriting, and its pointers are unique. Against each document: `explain` agrees
    /// with `matches`, names one of the expression's terms and reports what the document holds;
    /// `not (e)` is `!e`; and where every compared value is present and of the literal's type (and
    /// ordered, for `<` and the like), the De Morgan negation with inverted operators (`<` ↔ `>=`,
    /// `==` ↔ `!=`, …), built independently here, evaluates to `!e`.
    static func whereExpressions(_ input: Input) -> Int32 {
        let split = input.bytes.firstIndex(of: 0) ?? input.bytes.endIndex
        let text = String(decoding: input.bytes[..<split], as: UTF8.self)
        let extra = split < input.bytes.endIndex ? Array(input.bytes[(split + 1)...]) : nil
        let expression: WhereExpression
        switch WhereExpression.parse(text) {
        case .failure(let error):
            if error.column < 1 || error.column > text.count + 1 {
                violated("column \(error.column) outside \(text.count) characters: \(error) for \(text.debugDescription)")
            }
            if error.message.isEmpty { violated("empty message for \(text.debugDescription)") }
            return 0
        case .success(let parsed):
            expression = parsed
        }
        if expression.source != text { violated("source \(expression.source.debugDescription) is not \(text.debugDescription)") }
        let canonical = expression.canonicalText
        switch WhereExpression.parse(canonical) {
        case .success(let again) where again.canonicalText == canonical: break
        case .success(let again):
            violated("\(text.debugDescription) rewritten as \(canonical.debugDescription) reads as \(again.canonicalText.debugDescription)")
        case .failure(let error):
            // The rewriting adds parentheses, which can exceed the nesting limit; nothing else may fail.
            if !error.message.contains("nested deeper") {
                violated("\(text.debugDescription) rewritten as \(canonical.debugDescription) is refused: \(error)")
            }
        }
        if Set(expression.pointers).count != expression.pointers.count { violated("duplicate pointers in \(text.debugDescription)") }
        let negation = WhereExpression.parse("not (" + text + ")")
        var terms: [String] = []
        expression.root.forEachTerm { terms.append($0.source) }
        let payloads = documents.map { Array($0.utf8) } + (extra.map { [$0] } ?? [])
        for payload in payloads {
            var document = PayloadDocument(payload)
            let matches = expression.matches(&document)
            if expression.matches(&document) != matches { violated("\(text.debugDescription) changed its verdict on a second evaluation") }
            var fresh = PayloadDocument(payload)
            let verdict = expression.explain(&fresh)
            if verdict.matches != matches { violated("explain says \(verdict.matches), matches \(matches) for \(text.debugDescription)") }
            if !terms.contains(verdict.decidingTerm) { violated("deciding term \(verdict.decidingTerm.debugDescription) is not a term") }
            for reading in verdict.readings where document.value(at: reading.pointer) != reading.value {
                violated("explain read \(String(describing: reading.value)) at \(reading.pointer)")
            }
            if case .success(let not) = negation, not.matches(&document) == matches {
                violated("not (\(text.debugDescription)) is \(!matches)")
            }
            if let negated = negated(expression.root, in: &document), negated.evaluate(&document) == matches {
                violated("the operator-inverted negation of \(text.debugDescription) is also \(matches) on \(payload)")
            }
        }
        return 0
    }

    /// The negation of `node` by De Morgan's laws with each comparison's operator inverted, or `nil`
    /// when some comparison cannot be inverted for `document`: its value is missing (every
    /// comparison is false, so `a != b` is not `!(a == b)`), of another type than the literal
    /// (likewise), or a boolean or null under `<`, `<=`, `>`, `>=` (always false).
    static func negated(_ node: WhereNode, in document: inout PayloadDocument) -> WhereNode? {
        switch node {
        case .term(let term):
            guard case .compare(let op, let literal) = term.test else { return .not(node) }
            guard let value = document.value(at: term.pointer) else { return nil }
            let ordered: Bool
            switch (value, literal) {
            case (.number, .number), (.string, .string): ordered = true
            case (.bool, .bool), (.null, .null): ordered = false
            default: return nil
            }
            let inverse: WhereOperator
            switch op {
            case .equal: inverse = .notEqual
            case .notEqual: inverse = .equal
            case .less where ordered: inverse = .greaterOrEqual
            case .lessOrEqual where ordered: inverse = .greater
            case .greater where ordered: inverse = .lessOrEqual
            case .greaterOrEqual where ordered: inverse = .less
            default: return nil
            }
            return .term(WhereTerm(pointer: term.pointer, test: .compare(inverse, literal), source: term.source))
        case .not(let inner):
            return inner
        case .all(let nodes), .any(let nodes):
            var inverted: [WhereNode] = []
            for child in nodes {
                guard let negatedChild = negated(child, in: &document) else { return nil }
                inverted.append(negatedChild)
            }
            if case .all = node { return .any(inverted) }
            return .all(inverted)
        }
    }

    // MARK: json-pointer

    /// The first line is a JSON pointer, the rest a payload. Differential: the pointer's syntax
    /// against the RFC 6901 §3–§4 rules written out below, and the value ``PayloadDocument``
    /// finds against an independent walk over Foundation's `JSONSerialization` (fragments
    /// allowed): both missing, or the same kind with equal strings (by scalars), equal numbers
    /// (as `Double`s, to a relative 1e-12 because Foundation reads long numbers as
    /// `NSDecimalNumber`), equal booleans, or objects and arrays of the same size.
    ///
    /// Skipped, because Foundation cannot decide the same thing:
    /// - payloads Foundation refuses: numbers it cannot represent (`1e400`), and anything else it
    ///   refuses (the `json` target checks our verdict on validity against three other parsers);
    /// - payloads Foundation accepts and the tokenizer refuses: Foundation allows trailing commas
    ///   (`[1,]`), a byte-order mark, and UTF-16 or UTF-32 text;
    /// - payloads with two member names that are canonically equivalent but not the same scalars
    ///   (`"K"` and U+212A KELVIN SIGN): Foundation's `[String: Any]` merges them, keeping the first
    ///   key and the last value, while RFC 6901 compares names by scalars.
    static func jsonPointers(_ input: Input) -> Int32 {
        let newline = input.bytes.firstIndex(of: 0x0A) ?? input.bytes.endIndex
        let pointerText = String(decoding: input.bytes[..<newline], as: UTF8.self)
        let payload = newline < input.bytes.endIndex ? Array(input.bytes[(newline + 1)...]) : []
        let reference = referenceTokens(pointerText)
        let pointer: JSONPointer
        switch JSONPointer.parse(pointerText) {
        case .failure(let error):
            if reference != nil { violated("\(pointerText.debugDescription) refused (\(error)), RFC 6901 allows it") }
            if error.column < 1 || error.column > pointerText.count + 1 {
                violated("column of \(error) for \(pointerText.debugDescription)")
            }
            return 0
        case .success(let parsed):
            pointer = parsed
        }
        guard let reference else { violated("\(pointerText.debugDescription) accepted, RFC 6901 refuses it") }
        if pointer.tokens.count != reference.count
            || !zip(pointer.tokens, reference).allSatisfy({ $0.unicodeScalars.elementsEqual($1.unicodeScalars) })
        {
            violated("\(pointerText.debugDescription) reads as \(pointer.tokens), RFC 6901 says \(reference)")
        }
        var document = PayloadDocument(payload)
        let found = document.value(at: pointer)
        if document.value(at: pointer) != found { violated("a second lookup differs") }
        var checkedFirst = PayloadDocument(payload)
        let valid = checkedFirst.isJSON()
        if checkedFirst.value(at: pointer) != found { violated("the lookup after isJSON() differs") }
        if valid != JSONTokenizer.isValid(payload) { violated("isJSON() differs from the tokenizer") }
        if !valid && found != nil { violated("a value \(String(describing: found)) in a payload that is not JSON") }
        if case .number(let text) = found, !JSONNumber.isValid(text) { violated("number text \(text.debugDescription)") }
        checkPrefetch(pointer, payload)

        guard let root = try? JSONSerialization.jsonObject(with: Data(payload), options: .fragmentsAllowed) else { return 0 }
        guard valid, !hasEquivalentMemberNames(payload) else { return 0 }
        let expected = walk(root, reference[...])
        compare(found, expected, pointerText)
        return 0
    }

    /// One pass for several pointers (the pointer, its three longest prefixes, each with `/0` and `/x`
    /// appended) finds what one pass each finds.
    static func checkPrefetch(_ pointer: JSONPointer, _ payload: [UInt8]) {
        var texts: [String] = []
        let scalars = pointer.source.unicodeScalars
        for index in scalars.indices where scalars[index] == "/" { texts.append(String(pointer.source[..<index])) }
        texts.append(pointer.source)
        // The last few prefixes are enough, and keep the target fast on long pointers.
        texts = Array(texts.suffix(4))
        texts += texts.flatMap { [$0 + "/0", $0 + "/x"] }
        let pointers = texts.compactMap { try? JSONPointer.parse($0).get() }
        if pointers.count != texts.count { violated("a prefix of \(pointer.source.debugDescription) is refused") }
        var together = PayloadDocument(payload)
        together.prefetch(pointers)
        for each in pointers {
            var alone = PayloadDocument(payload)
            let expected = alone.value(at: each)
            if together.value(at: each) != expected {
                violated("prefetch finds something else than a lookup at \(each.source.debugDescription)")
            }
        }
    }

    /// RFC 6901 §3–§4 written out: `nil` when the text is not a pointer.
    static func referenceTokens(_ text: String) -> [String]? {
        if text.isEmpty { return [] }
        // By scalars: `hasPrefix("/")` is false for "/" followed by a combining mark (one `Character`).
        guard text.unicodeScalars.first == "/" else { return nil }
        var tokens: [String] = []
        // Split and replace on scalars: "/" followed by a combining mark is one `Character`.
        for raw in text.unicodeScalars.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let scalars = Array(raw)
            for (offset, scalar) in scalars.enumerated() where scalar == "~" {
                guard offset + 1 < scalars.count, scalars[offset + 1] == "0" || scalars[offset + 1] == "1" else { return nil }
            }
            // "first transforming any occurrence of the sequence '~1' to '/', and then transforming
            // any occurrence of the sequence '~0' to '~'" (RFC 6901 §4).
            let slashes = replacing("~", "1", with: "/", in: scalars)
            tokens.append(String(String.UnicodeScalarView(replacing("~", "0", with: "~", in: slashes))))
        }
        return tokens
    }

    /// `scalars` with every `first` followed by `second` replaced by `replacement`, left to right.
    static func replacing(
        _ first: Unicode.Scalar, _ second: Unicode.Scalar, with replacement: Unicode.Scalar, in scalars: [Unicode.Scalar]
    ) -> [Unicode.Scalar] {
        var output: [Unicode.Scalar] = []
        var index = 0
        while index < scalars.count {
            if scalars[index] == first, index + 1 < scalars.count, scalars[index + 1] == second {
                output.append(replacement)
                index += 2
            } else {
                output.append(scalars[index])
                index += 1
            }
        }
        return output
    }

    /// The independent lookup: `nil` when nothing is there.
    static func walk(_ value: Any, _ tokens: ArraySlice<String>) -> Any? {
        guard let token = tokens.first else { return value }
        if let object = value as? [String: Any] {
            // By scalars, not `String`'s canonical equivalence (the input has no equivalent names).
            guard let key = object.keys.first(where: { $0.unicodeScalars.elementsEqual(token.unicodeScalars) }) else { return nil }
            return walk(object[key] as Any, tokens.dropFirst())
        }
        if let array = value as? [Any] {
            let digits = token.unicodeScalars.allSatisfy { ("0"..."9").contains($0) }
            guard digits, !token.isEmpty, token == "0" || !token.hasPrefix("0"), let index = Int(token), index < array.count else {
                return nil
            }
            return walk(array[index], tokens.dropFirst())
        }
        return nil
    }

    /// Foundation's type for `true` and `false` (an `NSNumber` subclass; `is Bool` holds for any 0 or 1).
    static let booleanType: ObjectIdentifier? = (parsed("true") as? NSNumber).map { ObjectIdentifier(type(of: $0)) }

    /// Checks our value against Foundation's (`nil`: missing).
    static func compare(_ found: JSONPointerValue?, _ expected: Any?, _ pointer: String) {
        func mismatch() -> Never {
            violated("at \(pointer.debugDescription) found \(String(describing: found)), Foundation has \(String(describing: expected))")
        }
        guard let expected else {
            if found != nil { mismatch() }
            return
        }
        guard let found else { mismatch() }
        switch found {
        case .string(let text):
            guard let other = expected as? String, text.unicodeScalars.elementsEqual(other.unicodeScalars) else { mismatch() }
        case .number(let text):
            guard let number = expected as? NSNumber, ObjectIdentifier(type(of: number)) != booleanType, let value = Double(text) else {
                mismatch()
            }
            let other = number.doubleValue
            if value != other && abs(value - other) > 1e-12 * max(abs(value), abs(other)) { mismatch() }
        case .bool(let flag):
            guard let number = expected as? NSNumber, ObjectIdentifier(type(of: number)) == booleanType, number.boolValue == flag else {
                mismatch()
            }
        case .null:
            guard expected is NSNull else { mismatch() }
        case .object(let text):
            guard let object = expected as? [String: Any], let mine = parsed(text) as? [String: Any], mine.count == object.count else {
                mismatch()
            }
        case .array(let text):
            guard let array = expected as? [Any], let mine = parsed(text) as? [Any], mine.count == array.count else { mismatch() }
        }
    }

    /// `text` parsed by Foundation, fragments allowed.
    private static func parsed(_ text: String) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)
    }

    /// Whether two member names in `payload` (valid JSON) are canonically equivalent but differ
    /// in scalars. Finds member names as the strings followed by `:`, decoded by Foundation.
    static func hasEquivalentMemberNames(_ payload: [UInt8]) -> Bool {
        var seen: [String: [Unicode.Scalar]] = [:]
        var index = 0
        while index < payload.count {
            guard payload[index] == UInt8(ascii: "\"") else {
                index += 1
                continue
            }
            var end = index + 1
            while end < payload.count, payload[end] != UInt8(ascii: "\"") { end += payload[end] == UInt8(ascii: "\\") ? 2 : 1 }
            guard end < payload.count else { return false }
            var after = end + 1
            while after < payload.count, [0x20, 0x09, 0x0A, 0x0D].contains(payload[after]) { after += 1 }
            if after < payload.count, payload[after] == UInt8(ascii: ":"),
                let name = parsed(String(decoding: payload[index...end], as: UTF8.self)) as? String
            {
                let scalars = Array(name.unicodeScalars)
                if let other = seen[name], other != scalars { return true }
                seen[name] = scalars
            }
            index = end + 1
        }
        return false
    }
}
