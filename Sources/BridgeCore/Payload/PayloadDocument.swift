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
/// read to its end, and a lookup costs one pass over the payload. ``prefetch(_:)`` resolves up
/// to 64 pointers in one such pass (a `where` filter prefetches all of its pointers). Results are
/// cached per pointer for the document, so several rules or terms reading the same pointer pay
/// once.
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
        if let cached = cached(pointer) { return cached.value }
        withUnsafePointer(to: pointer) { resolve(UnsafeBufferPointer(start: $0, count: 1)) }
        return cached(pointer)?.value
    }

    /// Looks up every pointer of `pointers` that is not cached yet in one pass over the payload
    /// (instead of one pass each); ``value(at:)`` then answers from the cache. A `where` filter
    /// does this for all its pointers before it evaluates.
    public mutating func prefetch(_ pointers: [JSONPointer]) {
        if validity == false { return }
        pointers.withUnsafeBufferPointer { all in
            var start = 0
            while start < all.count {
                // At most 64 pointers a pass: the walk tracks them as the bits of one word.
                let end = min(start + 64, all.count)
                resolve(UnsafeBufferPointer(rebasing: all[start..<end]))
                start = end
            }
        }
    }

    /// The cache entry for `pointer`.
    private func cached(_ pointer: JSONPointer) -> CachedValue? {
        for cached in cache where cached.pointer == pointer { return cached }
        return nil
    }

    /// Walks the whole document once for those of `pointers` (at most 64) that are not cached,
    /// caching what they find and whether the document is valid JSON. Allocates only the values
    /// found and the cache's entries.
    private mutating func resolve(_ pointers: UnsafeBufferPointer<JSONPointer>) {
        var wanted: UInt64 = 0
        for (offset, pointer) in pointers.enumerated() where cached(pointer) == nil && !pointers.prefix(offset).contains(pointer) {
            wanted |= 1 << UInt64(offset)
        }
        guard wanted != 0 else { return }
        let bytes = self.bytes
        var valid = true
        withUnsafeTemporaryAllocation(of: Location?.self, capacity: pointers.count) { found in
            found.initialize(repeating: nil)
            bytes.withUnsafeBufferPointer { buffer in
                var tokenizer = JSONTokenizer(buffer)
                do throws(JSONSyntaxError) {
                    guard let first = try tokenizer.next() else { throw tokenizer.failure("empty document") }
                    try Self.locate(pointers, wanted, depth: 0, in: first, with: &tokenizer, found: found)
                    // The rest must be whitespace: this pass has then checked the whole document.
                    guard try tokenizer.next() == nil else { throw tokenizer.failure("unexpected data after the value") }
                    for offset in pointers.indices where wanted & (1 << UInt64(offset)) != 0 {
                        let value = found[offset].map { Self.value(at: $0, in: tokenizer) }
                        cache.append(CachedValue(pointer: pointers[offset], value: value))
                    }
                } catch {
                    valid = false
                }
            }
        }
        validity = valid
        if !valid { cache.removeAll() }
    }

    /// Reads the value that `first` (just returned by the tokenizer) starts, all of it, and records
    /// in `found` where each pointer of `active` (bits, indexes into `pointers`) leads inside it,
    /// given that their first `depth` steps led here. Recursion is bounded by the document's
    /// nesting, which the tokenizer limits.
    private static func locate(
        _ pointers: UnsafeBufferPointer<JSONPointer>, _ active: UInt64, depth: Int, in first: JSONToken,
        with tokenizer: inout JSONTokenizer, found: UnsafeMutableBufferPointer<Location?>
    ) throws(JSONSyntaxError) {
        var ending: UInt64 = 0
        var descending: UInt64 = 0
        for index in pointers.indices where active & (1 << UInt64(index)) != 0 {
            if pointers[index].steps.count == depth { ending |= 1 << UInt64(index) } else { descending |= 1 << UInt64(index) }
        }
        var range = first.range
        switch first.kind {
        case .beginObject where descending != 0:
            while true {
                let name = try nextToken(&tokenizer)
                if name.kind == .endObject {
                    range = first.range.lowerBound..<name.range.upperBound
                    break
                }
                let value = try nextToken(&tokenizer)
                var matching: UInt64 = 0
                for index in pointers.indices where descending & (1 << UInt64(index)) != 0 {
                    if memberName(name, in: tokenizer.bytes, equals: pointers[index].steps[depth].name) { matching |= 1 << UInt64(index) }
                }
                guard matching != 0 else {
                    _ = try tokenizer.skipValue(startingWith: value)
                    continue
                }
                // A later member of the same name replaces this one (the last one wins).
                for index in pointers.indices where matching & (1 << UInt64(index)) != 0 { found[index] = nil }
                try locate(pointers, matching, depth: depth + 1, in: value, with: &tokenizer, found: found)
            }
        case .beginArray where descending != 0:
            var position = 0
            while true {
                let element = try nextToken(&tokenizer)
                if element.kind == .endArray {
                    range = first.range.lowerBound..<element.range.upperBound
                    break
                }
                var matching: UInt64 = 0
                for index in pointers.indices where descending & (1 << UInt64(index)) != 0 && pointers[index].steps[depth].index == position
                {
                    matching |= 1 << UInt64(index)
                }
                if matching != 0 {
                    try locate(pointers, matching, depth: depth + 1, in: element, with: &tokenizer, found: found)
                } else {
                    _ = try tokenizer.skipValue(startingWith: element)
                }
                position += 1
            }
        default:
            // Nothing descends, or a string, number or literal (no members; its token is read).
            range = try tokenizer.skipValue(startingWith: first)
        }
        for index in pointers.indices where ending & (1 << UInt64(index)) != 0 {
            found[index] = Location(first: first, range: range)
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
