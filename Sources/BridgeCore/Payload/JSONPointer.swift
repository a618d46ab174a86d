/// An RFC 6901 JSON Pointer, parsed once at config load (docs/contract.md §7.3).
///
/// The syntax, exactly as RFC 6901 §3–§4 give it:
/// - `""` is the whole document; any other pointer starts with `/`, and each `/` starts one
///   reference token (so `"/"` is the member whose name is the empty string);
/// - in a token, `~1` stands for `/` and `~0` for `~`, decoded left to right, so `~01` is `~1`
///   (the RFC's "`~1` before `~0`" order); a `~` followed by anything else, or by nothing, is a
///   syntax error at the `~`'s column;
/// - nothing else is escaped: `%`, `"`, `\`, spaces and non-ASCII are themselves.
///
/// How a token selects (RFC 6901 §4): in an object it is a member name, compared by Unicode scalar
/// values (no normalisation, so `é` and `e` + U+0301 differ), and when a name occurs twice the
/// *last* member wins, as in `JSON.parse`, Python and Foundation. In an array it must be an index,
/// `0` or digits without a leading zero; `-` (the element after the last) and any other token find
/// nothing. A token that looks like an index (`0`, `12`) on an object is simply a member name.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// The pointer as written, e.g. `/a~1b/0`; `""` is the whole document.
    public let source: String
    /// The unescaped reference tokens (`/a~1b/0` has `a/b` and `0`).
    public let tokens: [String]
    /// The tokens prepared for matching: their UTF-8 and, for index tokens, the index.
    let steps: [Step]

    /// One reference token, ready for a walk.
    struct Step: Sendable {
        /// The token's UTF-8, compared with member names byte for byte.
        let name: [UInt8]
        /// The array index the token denotes: `nil` for `-`, a leading zero, a non-digit, or an
        /// index too large to exist.
        let index: Int?
    }

    private init(source: String, tokens: [String]) {
        self.source = source
        self.tokens = tokens
        self.steps = tokens.map { Step(name: Array($0.utf8), index: Self.arrayIndex($0)) }
    }

    /// Parses `text`; an error names the problem and its 1-based column (in `Character`s of `text`).
    public static func parse(_ text: String) -> Result<JSONPointer, PayloadSyntaxError> {
        switch parse(text[...]) {
        case .success(let pointer): .success(pointer)
        case .failure(let failure): .failure(PayloadSyntaxError(message: failure.message, at: failure.position, in: text))
        }
    }

    /// The pointer as written.
    public var description: String { source }

    /// Pointers are equal when written the same way.
    public static func == (lhs: JSONPointer, rhs: JSONPointer) -> Bool { lhs.source == rhs.source }

    /// Hashes the source text.
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }

    /// Parses a part of a larger text (a `where` expression); a failure carries the position in it.
    static func parse(_ text: Substring) -> Result<JSONPointer, PositionedFailure> {
        guard let first = text.unicodeScalars.first else { return .success(JSONPointer(source: "", tokens: [])) }
        guard first == "/" else {
            return .failure(PositionedFailure(message: "a JSON pointer must be empty or start with '/'", position: text.startIndex))
        }
        var tokens: [String] = []
        var current = String.UnicodeScalarView()
        let scalars = text.unicodeScalars
        var index = scalars.index(after: scalars.startIndex)
        while index < scalars.endIndex {
            let scalar = scalars[index]
            switch scalar {
            case "/":
                tokens.append(String(current))
                current = String.UnicodeScalarView()
            case "~":
                let next = scalars.index(after: index)
                let escaped: Unicode.Scalar? = next < scalars.endIndex ? scalars[next] : nil
                switch escaped {
                case "0"?: current.append("~")
                case "1"?: current.append("/")
                case nil:
                    return .failure(
                        PositionedFailure(message: "'~' at the end of a JSON pointer (write ~0 for '~', ~1 for '/')", position: index))
                case let other?:
                    return .failure(
                        PositionedFailure(
                            message: "invalid escape '~\(other)' in a JSON pointer (write ~0 for '~', ~1 for '/')", position: index))
                }
                index = next
            default:
                current.append(scalar)
            }
            index = scalars.index(after: index)
        }
        tokens.append(String(current))
        return .success(JSONPointer(source: String(text), tokens: tokens))
    }

    /// The index a token denotes in an array (RFC 6901 §4: `0` or digits without a leading zero).
    private static func arrayIndex(_ token: String) -> Int? {
        let utf8 = token.utf8
        guard let first = utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return nil }
        guard first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
        var value = 0
        for byte in utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            // Larger than any array can be: it never finds an element.
            if overflow1 || overflow2 { return nil }
            value = sum
        }
        return value
    }
}

/// A syntax error in a JSON pointer or a `where` expression: what was wrong and where.
public struct PayloadSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, naming what was expected (e.g. `expected a comparison operator after /temperature`).
    public var message: String
    /// The 1-based column in `Character`s of the text parsed; one past the last character when the
    /// text ended too soon.
    public var column: Int

    /// An error from its parts.
    public init(message: String, column: Int) {
        self.message = message
        self.column = column
    }

    /// An error at `position` in `text`, its column counted in `Character`s.
    init(message: String, at position: String.Index, in text: String) {
        self.init(message: message, column: text[..<position].count + 1)
    }

    /// `MESSAGE at column N`.
    public var description: String { "\(message) at column \(column)" }
}

/// A syntax error at a position in the text being parsed, before it becomes a column.
struct PositionedFailure: Error {
    /// What was wrong.
    var message: String
    /// Where, in the text being parsed.
    var position: String.Index
}
