import PusherProtocol

/// The value a ``JSONPointer`` found in a payload.
public enum JSONPointerValue: Sendable, Equatable {
    /// A string: its content, escapes decoded.
    case string(String)
    /// A number: its JSON text exactly as written in the payload (`1.50`, `-0`, `1e3`).
    case number(String)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// An object: its JSON text exactly as written, from `{` to `}`.
    case object(String)
    /// An array: its JSON text exactly as written, from `[` to `]`.
    case array(String)

    /// What `{json:/p}` puts into a template (docs/contract.md §7.3): a string's content, a number's
    /// or a boolean's JSON text; `nil` for `null`, an object or an array.
    public var templateText: String? {
        switch self {
        case .string(let content): content
        case .number(let text): text
        case .bool(let value): value ? "true" : "false"
        case .null, .object, .array: nil
        }
    }

    /// What `payload = "json:/p"` forwards (docs/contract.md §7.3): a string's content, anything
    /// else its JSON text exactly as written.
    public var projectionText: String {
        switch self {
        case .string(let content): content
        case .number(let text), .object(let text), .array(let text): text
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        }
    }
}

/// One message's payload, read lazily (docs/contract.md §7.3).
///
/// Pointer lookups walk the JSON with the project's one tokenizer (PusherProtocol's
/// `JSONTokenizer`) in a single forward pass: members and elements the pointer does not select are
/// skipped token by token, and no tree is built. Where the pointer leads is remembered as a range
/// of the bytes, and only the value finally found becomes a `String`. A member name that occurs
/// twice in an object is selected by its *last* occurrence, so an object on the path is always
/// read to its end. Results are cached per pointer for the document, so several rules or terms
/// reading the same pointer pay once.
///
/// A payload that is not exactly one JSON document (trailing data, invalid UTF-8, nested deeper
/// than `JSONTokenizer.maximumDepth`, …) has no values: every pointer finds nothing. The first
/// lookup checks the whole document in the same pass; that verdict is kept, so the document is
/// validated at most once.
public struct PayloadDocument: Sendable {
    /// The payload's bytes.
    private let bytes: [UInt8]
    /// Whether the bytes are one JSON document; `nil` until a lookup or ``isJSON()`` has read them all.
    private var validity: Bool?
    /// The values found so far, in the order first asked for.
    private var cache: [CachedValue] = []

    /// One cached lookup.
    private struct CachedValue: Sendable {
        /// The pointer asked for.
        let pointer: JSONPointer
        /// What it found.
        let value: JSONPointerValue?
    }

    /// Where a walk ended: the found value's first token and the range of its whole text.
    private struct Location {
        /// The value's first token (for a container, its opening bracket).
        let first: JSONToken
        /// The whole value's text.
        let range: Range<Int>
    }

    /// A document over a message's payload bytes.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Whether the payload is exactly one JSON document (validated at most once per document).
    public mutating func isJSON() -> Bool {
        if let validity { return validity }
        let valid = JSONTokenizer.isValid(bytes)
        validity = valid
        return valid
    }

    /// The value at `pointer`; `nil` when nothing is there or the payload is not (valid) JSON.
    public mutating func value(at pointer: JSONPointer) -> JSONPointerValue? {
        if validity == false { return nil }
        for cached in cache where cached.pointer == pointer { return cached.value }
        let value = lookUp(pointer)
        cache.append(CachedValue(pointer: pointer, value: value))
        return value
    }

    /// Walks the whole document once for `pointer`, recording whether it is valid JSON.
    private mutating func lookUp(_ pointer: JSONPointer) -> JSONPointerValue? {
        let outcome: Result<JSONPointerValue?, JSONSyntaxError> = bytes.withUnsafeBufferPointer { buffer in
            var tokenizer = JSONTokenizer(buffer)
            do throws(JSONSyntaxError) {
                guard let first = try tokenizer.next() else { throw tokenizer.failure("empty document") }
                let location = try Self.locate(pointer.steps[...], in: first, with: &tokenizer)
                // The rest must be whitespace: this pass has then checked the whole document.
                guard try tokenizer.next() == nil else { throw tokenizer.failure("unexpected data after the value") }
                return .success(location.map { Self.value(at: $0, in: tokenizer) })
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let value):
            validity = true
            return value
        case .failure:
            validity = false
            return nil
        }
    }

    /// Reads the value that `first` (just returned by the tokenizer) starts, all of it, and returns
    /// where `steps` lead inside it. Recursion is bounded by the document's nesting, which the
    /// tokenizer limits.
    private static func locate(
        _ steps: ArraySlice<JSONPointer.Step>, in first: JSONToken, with tokenizer: inout JSONTokenizer
    ) throws(JSONSyntaxError) -> Location? {
        guard let step = steps.first else {
            return Location(first: first, range: try tokenizer.skipValue(startingWith: first))
        }
        let rest = steps.dropFirst()
        var found: Location?
        switch first.kind {
        case .beginObject:
            while true {
                let name = try nextToken(&tokenizer)
                if name.kind == .endObject { return found }
                let value = try nextToken(&tokenizer)
                if memberName(name, in: tokenizer.bytes, equals: step.name) {
                    // A later member of the same name replaces this one (the last one wins).
                    found = try locate(rest, in: value, with: &tokenizer)
                } else {
                    _ = try tokenizer.skipValue(startingWith: value)
                }
            }
        case .beginArray:
            var position = 0
            while true {
                let element = try nextToken(&tokenizer)
                if element.kind == .endArray { return found }
                if position == step.index {
                    found = try locate(rest, in: element, with: &tokenizer)
                } else {
                    _ = try tokenizer.skipValue(startingWith: element)
                }
                position += 1
            }
        default:
            // A string, number or literal has no members; its one token is already read.
            return nil
        }
    }

    /// The next token inside a container (the document cannot end there).
    private static func nextToken(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> JSONToken {
        guard let token = try tokenizer.next() else { throw tokenizer.failure("unexpected end of input") }
        return token
    }

    /// The value at `location`, built once the walk is over.
    private static func value(at location: Location, in tokenizer: JSONTokenizer) -> JSONPointerValue {
        switch location.first.kind {
        case .string, .memberName: .string(tokenizer.string(of: location.first))
        case .number: .number(tokenizer.text(of: location.range))
        case .true: .bool(true)
        case .false: .bool(false)
        case .null: .null
        case .beginObject, .endObject: .object(tokenizer.text(of: location.range))
        case .beginArray, .endArray: .array(tokenizer.text(of: location.range))
        }
    }

    /// Whether the member name `token` (checked by the tokenizer) is `expected` (UTF-8), decoding
    /// its escapes on the fly without building a string.
    static func memberName(_ token: JSONToken, in bytes: UnsafeBufferPointer<UInt8>, equals expected: [UInt8]) -> Bool {
        let start = token.range.lowerBound + 1
        let end = token.range.upperBound - 1
        guard token.hasEscapes else {
            guard end - start == expected.count else { return false }
            var offset = 0
            while offset < expected.count {
                if bytes[start + offset] != expected[offset] { return false }
                offset += 1
            }
            return true
        }
        var index = start
        var matched = 0
        func match(_ byte: UInt8) -> Bool {
            guard matched < expected.count, expected[matched] == byte else { return false }
            matched += 1
            return true
        }
        while index < end {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                guard match(byte) else { return false }
                index += 1
                continue
            }
            let escaped = bytes[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "b"): guard match(0x08) else { return false }
            case UInt8(ascii: "f"): guard match(0x0C) else { return false }
            case UInt8(ascii: "n"): guard match(0x0A) else { return false }
            case UInt8(ascii: "r"): guard match(0x0D) else { return false }
            case UInt8(ascii: "t"): guard match(0x09) else { return false }
            case UInt8(ascii: "u"):
                var unit = JSONString.hex4(bytes, at: index) ?? 0xFFFD
                index += 4
                if (0xD800..<0xDC00).contains(unit) {
                    // The tokenizer has checked that `\u` and a low surrogate follow.
                    let low = JSONString.hex4(bytes, at: index + 2) ?? 0xDC00
                    index += 6
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                }
                var encoded = true
                UTF8.encode(Unicode.Scalar(unit) ?? "\u{FFFD}") { byte in encoded = encoded && match(byte) }
                guard encoded else { return false }
            default:
                guard match(escaped) else { return false }  // `"`, `\` or `/`
            }
        }
        return matched == expected.count
    }
}
