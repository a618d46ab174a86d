import PusherProtocol

/// The recursive-descent parser of `where` expressions (grammar: ``WhereExpression``). Errors
/// name what was expected, and where (a position that ``PayloadSyntaxError`` turns into a column).
struct WhereParser {
    /// One lexical token.
    struct Token {
        /// What a token is.
        enum Kind {
            /// `(`
            case open
            /// `)`
            case close
            /// A comparison operator.
            case comparison(WhereOperator)
            /// A JSON pointer (starts with `/`).
            case pointer(JSONPointer)
            /// A literal: a number or a "string".
            case literal(WhereLiteral)
            /// A run of other characters: a keyword, `true`/`false`/`null`, or something unknown.
            case word(Substring)
            /// The end of the text.
            case end
        }

        /// What it is.
        let kind: Kind
        /// Its text.
        let range: Range<String.Index>
    }

    /// The words the grammar knows, all lowercase.
    private static let keywords: Set<String> = ["and", "or", "not", "exists", "true", "false", "null"]

    /// The text being parsed.
    private let text: String
    /// The token being looked at.
    private var token: Token
    /// How many `(` and `not` enclose the current position.
    private var nesting = 0

    private init(text: String) throws(PositionedFailure) {
        self.text = text
        token = try Self.token(in: text, at: text.startIndex)
    }

    /// Parses a whole expression.
    static func parse(_ text: String) -> Result<WhereNode, PositionedFailure> {
        do throws(PositionedFailure) {
            var parser = try WhereParser(text: text)
            if case .end = parser.token.kind { throw PositionedFailure(message: "empty expression", position: text.startIndex) }
            let root = try parser.parseOr()
            guard case .end = parser.token.kind else { throw parser.unexpectedAfterTerm() }
            return .success(root)
        } catch {
            return .failure(error)
        }
    }

    // MARK: grammar

    private mutating func parseOr() throws(PositionedFailure) -> WhereNode {
        var nodes = [try parseAnd()]
        while isWord("or") {
            try advance()
            nodes.append(try parseAnd())
        }
        return nodes.count == 1 ? nodes[0] : .any(nodes)
    }

    private mutating func parseAnd() throws(PositionedFailure) -> WhereNode {
        var nodes = [try parseUnary()]
        while isWord("and") {
            try advance()
            nodes.append(try parseUnary())
        }
        return nodes.count == 1 ? nodes[0] : .all(nodes)
    }

    private mutating func parseUnary() throws(PositionedFailure) -> WhereNode {
        guard isWord("not") else { return try parsePrimary() }
        try enter()
        try advance()
        let operand = try parseUnary()
        nesting -= 1
        return .not(operand)
    }

    private mutating func parsePrimary() throws(PositionedFailure) -> WhereNode {
        let start = token.range.lowerBound
        switch token.kind {
        case .open:
            try enter()
            try advance()
            let inner = try parseOr()
            guard case .close = token.kind else {
                if case .end = token.kind { throw PositionedFailure(message: "unclosed '(' opened", position: start) }
                throw unexpectedAfterTerm()
            }
            try advance()
            nesting -= 1
            return inner
        case .pointer(let pointer):
            let pointerText = text[token.range]
            try advance()
            guard case .comparison(let op) = token.kind else { throw expected("a comparison operator after \(pointerText)") }
            try advance()
            let literal: WhereLiteral
            switch token.kind {
            case .literal(let value): literal = value
            case .word("true"): literal = .bool(true)
            case .word("false"): literal = .bool(false)
            case .word("null"): literal = .null
            default: throw expected("a literal (a number, a \"string\", true, false or null) after '\(op.rawValue)'")
            }
            let end = token.range.upperBound
            try advance()
            return .term(WhereTerm(pointer: pointer, test: .compare(op, literal), source: String(text[start..<end])))
        case .word("exists"):
            try advance()
            guard case .pointer(let pointer) = token.kind else { throw expected("a JSON pointer (starting with '/') after 'exists'") }
            let end = token.range.upperBound
            try advance()
            return .term(WhereTerm(pointer: pointer, test: .exists, source: String(text[start..<end])))
        default:
            let after = previous == nil ? "" : " after \(previousText)"
            throw expected("a term\(after) (POINTER OP LITERAL, exists POINTER, not or '(')")
        }
    }

    // MARK: tokens

    private func isWord(_ keyword: String) -> Bool {
        if case .word(let word) = token.kind { return word == keyword }
        return false
    }

    private mutating func advance() throws(PositionedFailure) {
        previous = token.range
        token = try Self.token(in: text, at: token.range.upperBound)
    }

    /// The previous token's text (for messages that name it).
    private var previous: Range<String.Index>?

    /// The previous token's text, quoted.
    private var previousText: String {
        guard let previous else { return "the start" }
        return "'\(text[previous])'"
    }

    private mutating func enter() throws(PositionedFailure) {
        nesting += 1
        guard nesting <= WhereExpression.maximumNesting else {
            throw PositionedFailure(
                message: "parentheses and 'not' nested deeper than \(WhereExpression.maximumNesting) levels",
                position: token.range.lowerBound)
        }
    }

    /// `expected …` at the current token, unless the token is a keyword in capitals.
    private func expected(_ what: String) -> PositionedFailure {
        if case .word(let word) = token.kind, !Self.keywords.contains(String(word)), Self.keywords.contains(word.lowercased()) {
            return PositionedFailure(message: "unknown keyword '\(word)' (keywords are lowercase)", position: token.range.lowerBound)
        }
        return PositionedFailure(message: "expected \(what)", position: token.range.lowerBound)
    }

    /// After a complete term, something other than `and`, `or`, `)` (inside parentheses) or the end.
    private func unexpectedAfterTerm() -> PositionedFailure {
        if case .close = token.kind, nesting == 0 {
            return PositionedFailure(message: "unexpected ')' without a matching '('", position: token.range.lowerBound)
        }
        return expected("'and', 'or' " + (nesting > 0 ? "or ')'" : "or the end") + " after \(previousText)")
    }

    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    /// Whether a pointer or word ends before `scalar`.
    private static func isDelimiter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case " ", "\t", "\n", "\r", "(", ")", "=", "!", "<", ">": true
        default: false
        }
    }

    /// The token at `start` (whitespace before it skipped).
    private static func token(in text: String, at start: String.Index) throws(PositionedFailure) -> Token {
        let scalars = text.unicodeScalars
        var index = start
        while index < scalars.endIndex, isWhitespace(scalars[index]) { index = scalars.index(after: index) }
        guard index < scalars.endIndex else { return Token(kind: .end, range: index..<index) }
        let first = scalars[index]
        let next = scalars.index(after: index)
        let followedByEquals = next < scalars.endIndex && scalars[next] == "="
        let afterPair = followedByEquals ? scalars.index(after: next) : next
        switch first {
        case "(": return Token(kind: .open, range: index..<next)
        case ")": return Token(kind: .close, range: index..<next)
        case "=", "!":
            guard followedByEquals else {
                let hint = first == "=" ? "write '==' to compare" : "write '!=' to compare, or 'not' to negate"
                throw PositionedFailure(message: "'\(first)' is not an operator (\(hint))", position: index)
            }
            return Token(kind: .comparison(first == "=" ? .equal : .notEqual), range: index..<afterPair)
        case "<": return Token(kind: .comparison(followedByEquals ? .lessOrEqual : .less), range: index..<afterPair)
        case ">": return Token(kind: .comparison(followedByEquals ? .greaterOrEqual : .greater), range: index..<afterPair)
        case "/":
            let end = runEnd(in: text, from: index) { isDelimiter($0) }
            switch JSONPointer.parse(text[index..<end]) {
            case .success(let pointer): return Token(kind: .pointer(pointer), range: index..<end)
            case .failure(let failure): throw failure
            }
        case "\"":
            return try stringLiteral(in: text, at: index)
        case "-", "0"..."9":
            let end = runEnd(in: text, from: index) { !("0"..."9").contains($0) && !".eE+-".unicodeScalars.contains($0) }
            let number = text[index..<end]
            guard JSONNumber.isValid(number), let value = Double(number) else {
                throw PositionedFailure(message: "invalid number '\(number)' (numbers are written as in JSON)", position: index)
            }
            return Token(kind: .literal(.number(value, text: String(number))), range: index..<end)
        default:
            let end = runEnd(in: text, from: index) { isDelimiter($0) || $0 == "\"" || $0 == "/" }
            return Token(kind: .word(text[index..<end]), range: index..<end)
        }
    }

    /// The end of the run of scalars from `start` (whose first scalar is part of it) up to the
    /// first one for which `stops` holds.
    private static func runEnd(in text: String, from start: String.Index, stops: (Unicode.Scalar) -> Bool) -> String.Index {
        let scalars = text.unicodeScalars
        var index = scalars.index(after: start)
        while index < scalars.endIndex, !stops(scalars[index]) { index = scalars.index(after: index) }
        return index
    }

    /// A JSON string literal whose opening quote is at `start`, checked and decoded by the
    /// project's JSON tokenizer.
    private static func stringLiteral(in text: String, at start: String.Index) throws(PositionedFailure) -> Token {
        let scalars = text.unicodeScalars
        var index = scalars.index(after: start)
        while index < scalars.endIndex, scalars[index] != "\"" {
            // Skip the escaped character, so that `\"` does not end the literal.
            if scalars[index] == "\\" { index = scalars.index(after: index) }
            if index < scalars.endIndex { index = scalars.index(after: index) }
        }
        guard index < scalars.endIndex else {
            throw PositionedFailure(message: "unterminated string literal (a '\"' opened here is never closed)", position: start)
        }
        let end = scalars.index(after: index)
        let literal = text[start..<end]
        do throws(JSONSyntaxError) {
            let value = try JSONTokenizer.withTokenizer(over: String(literal)) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                guard let token = try tokenizer.next() else { throw tokenizer.failure("empty") }
                return tokenizer.string(of: token)
            }
            return Token(kind: .literal(.string(value)), range: start..<end)
        } catch {
            let position = text.utf8.index(start, offsetBy: min(error.offset, literal.utf8.count - 1))
            throw PositionedFailure(message: "invalid string literal: \(error.message)", position: position)
        }
    }
}
