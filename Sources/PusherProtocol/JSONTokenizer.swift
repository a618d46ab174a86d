/// The project's one JSON grammar: a pull tokenizer over UTF-8 bytes (no Foundation) that the
/// client's frame scanner, pusher-local's value tree and the bridge's payload validator are thin
/// views of, so the three can never again disagree on what is JSON.
///
/// What it accepts is exactly one RFC 8259 value:
/// - numbers by ``JSONNumber`` (no `02`, `+2`, `1.`, `.5`, `1e`, `-`, `NaN`), literals by
///   ``JSONLiteral`` (`true`, `false`, `null`, nothing longer or shorter);
/// - strings whose bytes are well-formed UTF-8 (no overlong forms, no encoded surrogates, nothing
///   past U+10FFFF), without raw control characters, with the escapes RFC 8259 lists; a `\u`
///   escape of a UTF-16 surrogate must be a high one followed by a low one (a lone surrogate is
///   allowed by the RFC's grammar, but no text can hold it, and hosted Pusher's parsers refuse it);
/// - bytes outside strings are the grammar's only, so invalid UTF-8 anywhere is refused;
/// - whitespace (space, tab, LF, CR) before and after the value, as all three parsers allowed
///   before they shared this one; a byte-order mark is not whitespace and is refused (none of them
///   accepted one either, and RFC 8259 §8.1 forbids sending one);
/// - at most ``maximumDepth`` nested objects and arrays.
///
/// The tokenizer keeps its own stack of open containers (one bit per level, inline), so it never
/// recurses: hostile nesting costs neither stack nor allocation, and refusing it is a policy choice.
public struct JSONTokenizer {
    /// The nesting limit for every JSON text in the project: 512 objects and arrays deep is
    /// accepted, 513 is refused.
    ///
    /// Why 512 and not pusher-local's former 64: the bridge is the side that sees user data. An
    /// MQTT payload or an event's `data` that is JSON is embedded as a JSON value in the bridge's
    /// envelopes; one that is "not JSON" travels as a string, so a low limit would silently change
    /// the shape of a deeply nested but valid payload. Frames (pusher's envelope, a few levels) and
    /// pusher-local's request bodies (whose `data` is a string) come nowhere near either limit, so
    /// the larger one costs them nothing, while the tokenizer's inline stack makes depth free to
    /// check. 512 still bounds the recursion of code that walks a parsed tree (pusher-local's
    /// `JSONValue` encoding and equality) to a depth any thread's stack holds. Note that wrapping a
    /// payload in an envelope adds one level: a 512-deep payload makes a 513-deep envelope.
    public static let maximumDepth = 512

    /// The bytes being read; tokens' ranges index into them.
    public let bytes: UnsafeBufferPointer<UInt8>
    /// The offset of the next byte to read.
    public private(set) var offset = 0
    private var containers = ContainerStack()
    private var expecting = Expectation.documentValue

    /// What the grammar allows next.
    private enum Expectation {
        /// The document's value (nothing read yet).
        case documentValue
        /// A value: after `:` or after `,` in an array.
        case value
        /// After `[`.
        case valueOrEndArray
        /// After `{`.
        case nameOrEndObject
        /// After `,` in an object.
        case name
        /// After a value inside an object or array.
        case separatorOrEnd
        /// After the document's value: only whitespace may follow.
        case documentEnd
        /// ``next()`` has returned `nil`.
        case finished
    }

    /// A tokenizer at the start of `bytes`, which must outlive it.
    public init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// How many objects and arrays are open.
    public var depth: Int { containers.count }

    // MARK: tokens

    /// The next token, or `nil` once the document's value has been read and only whitespace
    /// follows it. Separators (`,` and the `:` after a member name) are checked, never returned.
    public mutating func next() throws(JSONSyntaxError) -> JSONToken? {
        while true {
            skipWhitespace()
            switch expecting {
            case .documentValue, .value:
                return try readValueStart()
            case .valueOrEndArray:
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") { return close(.endArray) }
                return try readValueStart()
            case .nameOrEndObject:
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") { return close(.endObject) }
                return try readMemberName()
            case .name:
                return try readMemberName()
            case .separatorOrEnd:
                let inObject = containers.topIsObject
                guard offset < bytes.count else { throw failure("unexpected end of input") }
                switch bytes[offset] {
                case UInt8(ascii: ","):
                    offset += 1
                    expecting = inObject ? .name : .value
                case UInt8(ascii: "}") where inObject: return close(.endObject)
                case UInt8(ascii: "]") where !inObject: return close(.endArray)
                default: throw failure(inObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
            case .documentEnd:
                guard offset == bytes.count else { throw failure("unexpected data after the value") }
                expecting = .finished
                return nil
            case .finished:
                return nil
            }
        }
    }

    /// Reads to the end of the value that `first` (the token ``next()`` just returned) starts,
    /// checking all of it, and returns the range of its text: for an object or array up to its
    /// closing bracket, for any other value `first.range`.
    public mutating func skipValue(startingWith first: JSONToken) throws(JSONSyntaxError) -> Range<Int> {
        guard first.kind == .beginObject || first.kind == .beginArray else { return first.range }
        let outside = depth - 1
        var last = first
        while depth > outside {
            guard let token = try next() else { throw failure("unexpected end of input") }
            last = token
        }
        return first.range.lowerBound..<last.range.upperBound
    }

    /// Reads the rest of the document, checking it.
    public mutating func validateDocument() throws(JSONSyntaxError) {
        while try next() != nil {}
    }

    /// The value of a ``JSONToken/Kind/string`` or ``JSONToken/Kind/memberName`` token, escapes
    /// decoded (the tokenizer has checked them, so this cannot fail).
    public func string(of token: JSONToken) -> String {
        guard token.range.count >= 2 else { return "" }
        let content = UnsafeBufferPointer(rebasing: bytes[token.range.lowerBound + 1..<token.range.upperBound - 1])
        guard token.hasEscapes else { return String(decoding: content, as: UTF8.self) }
        return Self.unescape(content)
    }

    /// The source text of `range` (a token's, or one ``skipValue(startingWith:)`` returned).
    public func text(of range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// An error at the current offset, for views that refuse a valid document's shape.
    public func failure(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(message: message, offset: offset)
    }

    // MARK: grammar

    private mutating func readValueStart() throws(JSONSyntaxError) -> JSONToken {
        guard offset < bytes.count else { throw failure("unexpected end of input") }
        let start = offset
        let kind: JSONToken.Kind
        var hasEscapes = false
        switch bytes[start] {
        case UInt8(ascii: "{"):
            try open(object: true)
            return JSONToken(kind: .beginObject, range: start..<offset)
        case UInt8(ascii: "["):
            try open(object: false)
            return JSONToken(kind: .beginArray, range: start..<offset)
        case UInt8(ascii: "\""):
            hasEscapes = try scanString()
            kind = .string
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            kind = .true
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            kind = .false
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            kind = .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard let end = JSONNumber.end(in: bytes, from: start) else { throw failure("invalid number") }
            offset = end
            kind = .number
        default:
            throw failure("unexpected character")
        }
        finishValue()
        return JSONToken(kind: kind, range: start..<offset, hasEscapes: hasEscapes)
    }

    private mutating func readMemberName() throws(JSONSyntaxError) -> JSONToken {
        guard offset < bytes.count else { throw failure("unexpected end of input") }
        guard bytes[offset] == UInt8(ascii: "\"") else { throw failure("expected a member name") }
        let start = offset
        let hasEscapes = try scanString()
        let end = offset
        skipWhitespace()
        guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { throw failure("expected ':'") }
        offset += 1
        expecting = .value
        return JSONToken(kind: .memberName, range: start..<end, hasEscapes: hasEscapes)
    }

    private mutating func open(object: Bool) throws(JSONSyntaxError) {
        guard containers.count < Self.maximumDepth else { throw failure("nested deeper than \(Self.maximumDepth) levels") }
        containers.push(isObject: object)
        offset += 1
        expecting = object ? .nameOrEndObject : .valueOrEndArray
    }

    private mutating func close(_ kind: JSONToken.Kind) -> JSONToken {
        let start = offset
        offset += 1
        containers.pop()
        finishValue()
        return JSONToken(kind: kind, range: start..<offset)
    }

    private mutating func finishValue() {
        expecting = containers.count == 0 ? .documentEnd : .separatorOrEnd
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        guard JSONLiteral.matches(literal, in: bytes, at: offset) else { throw failure("invalid literal") }
        offset += literal.utf8CodeUnitCount
    }

    private mutating func skipWhitespace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x09, 0x0A, 0x0D: offset += 1
            default: return
            }
        }
    }

    /// A string at `offset` (its opening quote); returns whether it holds an escape.
    private mutating func scanString() throws(JSONSyntaxError) -> Bool {
        offset += 1
        var hasEscapes = false
        while offset < bytes.count {
            switch bytes[offset] {
            case UInt8(ascii: "\""):
                offset += 1
                return hasEscapes
            case UInt8(ascii: "\\"):
                hasEscapes = true
                try scanEscape()
            case 0..<0x20:
                throw failure("control character in string")
            case 0x80...:
                guard let length = JSONUTF8.sequenceLength(in: bytes, at: offset) else { throw failure("string is not valid UTF-8") }
                offset += length
            default:
                offset += 1
            }
        }
        throw failure("unterminated string")
    }

    /// The escape at `offset` (its backslash).
    private mutating func scanEscape() throws(JSONSyntaxError) {
        guard offset + 1 < bytes.count else { throw failure("unterminated string") }
        switch bytes[offset + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
            UInt8(ascii: "r"), UInt8(ascii: "t"):
            offset += 2
        case UInt8(ascii: "u"):
            guard let unit = JSONString.hex4(bytes, at: offset + 2) else { throw failure("invalid \\u escape") }
            if (0xDC00..<0xE000).contains(unit) { throw failure("unpaired surrogate") }
            if (0xD800..<0xDC00).contains(unit) {
                // A high surrogate must be followed by \u and a low surrogate (RFC 8259 §7).
                guard offset + 7 < bytes.count, bytes[offset + 6] == UInt8(ascii: "\\"), bytes[offset + 7] == UInt8(ascii: "u"),
                    let low = JSONString.hex4(bytes, at: offset + 8), (0xDC00..<0xE000).contains(low)
                else { throw failure("unpaired surrogate") }
                offset += 12
            } else {
                offset += 6
            }
        default:
            throw failure("invalid escape")
        }
    }
}
