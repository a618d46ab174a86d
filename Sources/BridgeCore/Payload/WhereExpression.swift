import PusherProtocol

/// A compiled `where` filter (docs/contract.md §7.3): parsed once at config load, evaluated
/// against each message's ``PayloadDocument``.
///
/// Grammar (keywords are lowercase; `AND` is refused with a hint):
///
///     expr    := or
///     or      := and ("or" and)*
///     and     := unary ("and" unary)*
///     unary   := "not" unary | primary
///     primary := "(" expr ")" | "exists" POINTER | POINTER OP LITERAL
///     OP      := == | != | < | <= | > | >=
///     LITERAL := a JSON number | a JSON string in double quotes (JSON escapes, \uXXXX included)
///              | true | false | null
///
/// So `not` binds tighter than `and`, and `and` tighter than `or`. Whitespace is space, tab, CR
/// and LF. A POINTER starts with `/` and runs until whitespace, `(`, `)` or one of `=`, `!`, `<`,
/// `>`; it is then read as an RFC 6901 pointer (``JSONPointer``). Member names that contain those
/// characters therefore cannot be addressed in `where` (templates and `payload = "json:…"` can).
/// Parentheses and `not` nest at most ``maximumNesting`` deep.
///
/// Evaluation:
/// - values of different JSON types are never equal (`==` is false, `!=` true) and never ordered
///   (`<`, `<=`, `>`, `>=` are false); an object or array in the payload has a different type
///   from every literal;
/// - numbers compare numerically as `Double`s (so `1.0 == 1`, `1e3 == 1000`, and integers beyond
///   2^53 compare as their nearest `Double`);
/// - strings compare by Unicode scalar values, without normalisation;
/// - booleans and `null` are only equal or unequal: `<` and the like are false for them;
/// - a pointer that finds nothing makes every comparison false, `!=` included;
/// - `exists` is true for any value that is there, `null` included;
/// - `and` and `or` stop at the first term that settles them;
/// - a payload that is not JSON has no values at all.
public struct WhereExpression: Sendable, Hashable, CustomStringConvertible {
    /// How deep parentheses and `not` may nest; deeper is a syntax error (it bounds the recursion
    /// of parsing and evaluating).
    public static let maximumNesting = 64

    /// The expression as written.
    public let source: String
    /// The parsed tree.
    let root: WhereNode
    /// Every pointer the expression reads, in order of first appearance, no duplicates.
    public let pointers: [JSONPointer]

    init(source: String, root: WhereNode) {
        self.source = source
        self.root = root
        var pointers: [JSONPointer] = []
        root.forEachTerm { term in
            if !pointers.contains(term.pointer) { pointers.append(term.pointer) }
        }
        self.pointers = pointers
    }

    /// Parses `text`; an error names what was expected and its 1-based column (in `Character`s).
    public static func parse(_ text: String) -> Result<WhereExpression, PayloadSyntaxError> {
        switch WhereParser.parse(text) {
        case .success(let root): .success(WhereExpression(source: text, root: root))
        case .failure(let failure): .failure(PayloadSyntaxError(message: failure.message, at: failure.position, in: text))
        }
    }

    /// Whether `document` passes the filter. All the expression's pointers are looked up first,
    /// in one pass over the payload (``PayloadDocument/prefetch(_:)``), which costs less than a
    /// pass for each of them even when short-circuiting would skip some. Allocates nothing beyond
    /// the document's cache and the values it holds.
    public func matches(_ document: inout PayloadDocument) -> Bool {
        document.prefetch(pointers)
        return root.evaluate(&document)
    }

    /// The verdict with the term that decided it and the values read (for `route --payload`).
    public func explain(_ document: inout PayloadDocument) -> WhereVerdict {
        document.prefetch(pointers)
        var readings: [PointerReading] = []
        let (matches, term) = root.explain(&document, readings: &readings)
        return WhereVerdict(matches: matches, decidingTerm: term.source, readings: readings)
    }

    /// The expression as written.
    public var description: String { source }

    /// Expressions are equal when written alike.
    public static func == (lhs: WhereExpression, rhs: WhereExpression) -> Bool { lhs.source == rhs.source }

    /// Hashes the source text.
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }

    /// The tree written back fully parenthesised, literals in canonical JSON: parsing it gives the
    /// same tree (the `where` fuzz target checks this).
    var canonicalText: String { root.canonicalText }
}

/// What a `where` filter said about one payload, and why.
public struct WhereVerdict: Sendable, Equatable {
    /// Whether the payload passes the filter.
    public var matches: Bool
    /// The source text of the term that decided the verdict: with short-circuiting, in `a and b`
    /// with `a` false it is `a`; under `not` it is the negated term itself.
    public var decidingTerm: String
    /// The pointer values the evaluation read, in the order first read, each pointer once.
    public var readings: [PointerReading]

    /// A verdict from its parts.
    public init(matches: Bool, decidingTerm: String, readings: [PointerReading]) {
        self.matches = matches
        self.decidingTerm = decidingTerm
        self.readings = readings
    }
}

/// One pointer a filter read, and what it found (`nil`: nothing there).
public struct PointerReading: Sendable, Equatable {
    /// The pointer.
    public var pointer: JSONPointer
    /// Its value in the payload, `nil` when missing.
    public var value: JSONPointerValue?

    /// A reading from its parts.
    public init(pointer: JSONPointer, value: JSONPointerValue?) {
        self.pointer = pointer
        self.value = value
    }
}

// MARK: tree

/// A comparison operator of `where`.
enum WhereOperator: String, Sendable {
    /// `==`
    case equal = "=="
    /// `!=`
    case notEqual = "!="
    /// `<`
    case less = "<"
    /// `<=`
    case lessOrEqual = "<="
    /// `>`
    case greater = ">"
    /// `>=`
    case greaterOrEqual = ">="

    /// The operator applied to two values of a type that is only equal or unequal.
    func holds(equal: Bool) -> Bool {
        switch self {
        case .equal: equal
        case .notEqual: !equal
        case .less, .lessOrEqual, .greater, .greaterOrEqual: false
        }
    }

    /// The operator applied to two ordered values.
    func holds<Value: Comparable>(_ lhs: Value, _ rhs: Value) -> Bool {
        switch self {
        case .equal: lhs == rhs
        case .notEqual: lhs != rhs
        case .less: lhs < rhs
        case .lessOrEqual: lhs <= rhs
        case .greater: lhs > rhs
        case .greaterOrEqual: lhs >= rhs
        }
    }
}

/// A literal on the right of a comparison.
enum WhereLiteral: Sendable, Equatable {
    /// A number: its value and its text as written.
    case number(Double, text: String)
    /// A string, escapes decoded.
    case string(String)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
}

/// One term: a comparison or `exists`.
struct WhereTerm: Sendable {
    /// What the term asks of the value.
    enum Test: Sendable {
        /// `exists POINTER`
        case exists
        /// `POINTER OP LITERAL`
        case compare(WhereOperator, WhereLiteral)
    }

    /// The pointer it reads.
    let pointer: JSONPointer
    /// What it asks.
    let test: Test
    /// Its text in the expression.
    let source: String

    /// Whether the term holds for `value` (`nil`: the pointer found nothing).
    func holds(for value: JSONPointerValue?) -> Bool {
        guard let value else { return false }
        guard case .compare(let op, let literal) = test else { return true }
        switch (value, literal) {
        case (.number(let text), .number(let number, _)):
            // Every JSON number is a valid `Double` literal (too large ones become infinities).
            guard let found = Double(text) else { return false }
            return op.holds(found, number)
        case (.string(let found), .string(let wanted)):
            // UTF-8 byte order is Unicode scalar order; no normalisation, unlike `String`'s `==`.
            let order = found.utf8.elementsEqual(wanted.utf8) ? 0 : found.utf8.lexicographicallyPrecedes(wanted.utf8) ? -1 : 1
            return op.holds(order, 0)
        case (.bool(let found), .bool(let wanted)):
            return op.holds(equal: found == wanted)
        case (.null, .null):
            return op.holds(equal: true)
        default:
            return op == .notEqual
        }
    }
}

/// A node of a parsed `where` expression.
indirect enum WhereNode: Sendable {
    /// A comparison or `exists`.
    case term(WhereTerm)
    /// `not` of a node.
    case not(WhereNode)
    /// Nodes joined by `and` (two or more).
    case all([WhereNode])
    /// Nodes joined by `or` (two or more).
    case any([WhereNode])

    /// Calls `body` for every term, left to right.
    func forEachTerm(_ body: (WhereTerm) -> Void) {
        switch self {
        case .term(let term): body(term)
        case .not(let node): node.forEachTerm(body)
        case .all(let nodes), .any(let nodes): for node in nodes { node.forEachTerm(body) }
        }
    }

    /// The node's value for `document`, short-circuiting.
    func evaluate(_ document: inout PayloadDocument) -> Bool {
        switch self {
        case .term(let term): return term.holds(for: document.value(at: term.pointer))
        case .not(let node): return !node.evaluate(&document)
        case .all(let nodes):
            for node in nodes where !node.evaluate(&document) { return false }
            return true
        case .any(let nodes):
            for node in nodes where node.evaluate(&document) { return true }
            return false
        }
    }

    /// The node's value and the term that decided it, appending what was read to `readings`.
    func explain(_ document: inout PayloadDocument, readings: inout [PointerReading]) -> (Bool, WhereTerm) {
        switch self {
        case .term(let term):
            let value = document.value(at: term.pointer)
            if !readings.contains(where: { $0.pointer == term.pointer }) {
                readings.append(PointerReading(pointer: term.pointer, value: value))
            }
            return (term.holds(for: value), term)
        case .not(let node):
            let (value, term) = node.explain(&document, readings: &readings)
            return (!value, term)
        case .all(let nodes), .any(let nodes):
            let settling = if case .all = self { false } else { true }
            // Parsing builds `all` and `any` with two nodes or more.
            var outcome = nodes[0].explain(&document, readings: &readings)
            for node in nodes.dropFirst() where outcome.0 != settling {
                outcome = node.explain(&document, readings: &readings)
            }
            return outcome
        }
    }

    /// The node written back fully parenthesised.
    var canonicalText: String {
        switch self {
        case .term(let term):
            switch term.test {
            case .exists: return "exists " + term.pointer.source
            case .compare(let op, let literal):
                let right =
                    switch literal {
                    case .number(_, let text): text
                    case .string(let value): JSONString.quoted(value)
                    case .bool(let value): value ? "true" : "false"
                    case .null: "null"
                    }
                return "\(term.pointer.source) \(op.rawValue) \(right)"
            }
        case .not(let node): return "not (\(node.canonicalText))"
        case .all(let nodes): return nodes.map { "(\($0.canonicalText))" }.joined(separator: " and ")
        case .any(let nodes): return nodes.map { "(\($0.canonicalText))" }.joined(separator: " or ")
        }
    }
}
