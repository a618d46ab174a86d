/// One token of a JSON document, as ``JSONTokenizer`` reads it.
public struct JSONToken: Sendable, Equatable {
    /// What a token is.
    public enum Kind: Sendable, Equatable {
        /// `{`
        case beginObject
        /// `}`
        case endObject
        /// `[`
        case beginArray
        /// `]`
        case endArray
        /// An object member's name: a string, whose following `:` the tokenizer has checked.
        case memberName
        /// A string value.
        case string
        /// A number (``JSONNumber``'s grammar).
        case number
        /// `true`
        case `true`
        /// `false`
        case `false`
        /// `null`
        case null
    }

    /// What the token is.
    public var kind: Kind
    /// Where it is in the tokenizer's bytes; strings and names with their quotes.
    public var range: Range<Int>
    /// For strings and names: whether the text holds an escape (if not, the bytes between the
    /// quotes are the value).
    public var hasEscapes: Bool

    /// A token from its parts.
    public init(kind: Kind, range: Range<Int>, hasEscapes: Bool = false) {
        self.kind = kind
        self.range = range
        self.hasEscapes = hasEscapes
    }
}

/// Why bytes are not one JSON document: what was wrong, and the byte offset where reading stopped.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public var message: String
    /// Byte offset into the input.
    public var offset: Int

    /// An error from its parts.
    public init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "\(message) at byte \(offset)" }
}

// MARK: entry points

extension JSONTokenizer {
    /// Runs `body` with a tokenizer over `bytes` (read in place when they are contiguous).
    public static func withTokenizer<Output>(
        over bytes: some Collection<UInt8>, _ body: (inout JSONTokenizer) throws(JSONSyntaxError) -> Output
    ) throws(JSONSyntaxError) -> Output {
        let outcome: Result<Output, JSONSyntaxError>? = bytes.withContiguousStorageIfAvailable { buffer in
            var tokenizer = JSONTokenizer(buffer)
            do throws(JSONSyntaxError) {
                return .success(try body(&tokenizer))
            } catch {
                return .failure(error)
            }
        }
        if let outcome { return try outcome.get() }
        return try withTokenizer(over: Array(bytes), body)
    }

    /// Runs `body` with a tokenizer over the UTF-8 of `text`.
    public static func withTokenizer<Output>(
        over text: String, _ body: (inout JSONTokenizer) throws(JSONSyntaxError) -> Output
    ) throws(JSONSyntaxError) -> Output {
        var text = text
        let outcome: Result<Output, JSONSyntaxError> = text.withUTF8 { buffer in
            var tokenizer = JSONTokenizer(buffer)
            do throws(JSONSyntaxError) {
                return .success(try body(&tokenizer))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Checks that `bytes` are exactly one JSON document.
    public static func validate(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) {
        try withTokenizer(over: bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in try tokenizer.validateDocument() }
    }

    /// Whether `bytes` are exactly one JSON document.
    public static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        do {
            try validate(bytes)
            return true
        } catch {
            return false
        }
    }

    /// Whether `text` is exactly one JSON document.
    public static func isValid(_ text: String) -> Bool {
        do {
            try withTokenizer(over: text) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in try tokenizer.validateDocument() }
            return true
        } catch {
            return false
        }
    }

    /// The value of a checked string's content (between the quotes), escapes decoded.
    static func unescape(_ content: UnsafeBufferPointer<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(content.count)
        var index = 0
        while index < content.count {
            let byte = content[index]
            guard byte == UInt8(ascii: "\\"), index + 1 < content.count else {
                out.append(byte)
                index += 1
                continue
            }
            let escaped = content[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = JSONString.hex4(content, at: index) ?? 0xFFFD
                index += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    // Checked by the tokenizer: `\uLOW` follows.
                    let low = JSONString.hex4(content, at: index + 2) ?? 0xDC00
                    index += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                let unicode = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                UTF8.encode(unicode) { out.append($0) }
            default:
                out.append(escaped)  // `"`, `\` or `/`
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

// MARK: parts

/// Which kind of container is open at each level, one bit per level (1: object), held inline so
/// that checking a document allocates nothing.
struct ContainerStack {
    /// 8 words of 64 bits: ``JSONTokenizer/maximumDepth`` levels.
    private var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    /// How many containers are open.
    private(set) var count = 0
    /// Whether the innermost container is an object (`false` when none is open); kept apart from
    /// `words` because every `,` and closing bracket asks.
    private(set) var topIsObject = false

    /// Opens a container; the caller keeps `count` below ``JSONTokenizer/maximumDepth``.
    mutating func push(isObject: Bool) {
        let (index, bit) = count.quotientAndRemainder(dividingBy: 64)
        let mask: UInt64 = 1 << UInt64(bit)
        let word = self.word(index)
        setWord(index, isObject ? word | mask : word & ~mask)
        count += 1
        topIsObject = isObject
    }

    /// Closes the innermost container.
    mutating func pop() {
        count -= 1
        guard count > 0 else {
            topIsObject = false
            return
        }
        let (index, bit) = (count - 1).quotientAndRemainder(dividingBy: 64)
        topIsObject = word(index) >> UInt64(bit) & 1 == 1
    }

    private func word(_ index: Int) -> UInt64 {
        switch index {
        case 0: words.0
        case 1: words.1
        case 2: words.2
        case 3: words.3
        case 4: words.4
        case 5: words.5
        case 6: words.6
        default: words.7
        }
    }

    private mutating func setWord(_ index: Int, _ value: UInt64) {
        switch index {
        case 0: words.0 = value
        case 1: words.1 = value
        case 2: words.2 = value
        case 3: words.3 = value
        case 4: words.4 = value
        case 5: words.5 = value
        case 6: words.6 = value
        default: words.7 = value
        }
    }
}

/// Well-formed UTF-8, as JSON strings must be.
enum JSONUTF8 {
    /// The length of the well-formed UTF-8 sequence at `start` (its lead byte is ≥ 0x80), or `nil`
    /// (Unicode Table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF).
    static func sequenceLength(in bytes: UnsafeBufferPointer<UInt8>, at start: Int) -> Int? {
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            start + offset < bytes.count && range.contains(bytes[start + offset])
        }
        switch bytes[start] {
        case 0xC2...0xDF: return continuation(1) ? 2 : nil
        case 0xE0: return continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF: return continuation(1) && continuation(2) ? 3 : nil
        case 0xED: return continuation(1, 0x80...0x9F) && continuation(2) ? 3 : nil
        case 0xF0: return continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF1...0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF4: return continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : nil
        default: return nil
        }
    }
}
