import PusherProtocol
/// Just enough JSON for the per-message path, without a Foundation round trip (DESIGN §5.1):
/// a validating scanner (RFC 8259) that decides whether `data` can be embedded as a JSON value,
/// and a string writer. Both work on UTF-8 bytes and allocate nothing but their output.
public enum JSONText {
    /// Whether `bytes` is exactly one JSON value (surrounding whitespace allowed).
    public static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        let result: Bool? = bytes.withContiguousStorageIfAvailable { buffer in
            var scanner = Scanner(bytes: buffer)
            return scanner.scanDocument()
        }
        if let result { return result }
        return Array(bytes).withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer)
            return scanner.scanDocument()
        }
    }

    /// Whether `text` is exactly one JSON value.
    public static func isValid(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { buffer in
            var scanner = Scanner(bytes: buffer)
            return scanner.scanDocument()
        }
    }

    /// Appends `value` as a JSON string literal (quotes included) to `output`.
    public static func appendString(_ value: some StringProtocol, to output: inout [UInt8]) {
        JSONString.append(value, to: &output)
    }

    /// `value` as a JSON string literal.
    public static func quoted(_ value: some StringProtocol) -> String {
        JSONString.quoted(value)
    }

    /// A recursive-descent validator. Depth is bounded so hostile input cannot overflow the stack.
    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var depth = 0
        static let maximumDepth = 512

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func scanDocument() -> Bool {
            skipWhitespace()
            guard scanValue() else { return false }
            skipWhitespace()
            return index == bytes.count
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func scanValue() -> Bool {
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"): return scanObject()
            case UInt8(ascii: "["): return scanArray()
            case UInt8(ascii: "\""): return scanString()
            case UInt8(ascii: "t"): return scanLiteral("true")
            case UInt8(ascii: "f"): return scanLiteral("false")
            case UInt8(ascii: "n"): return scanLiteral("null")
            default: return scanNumber()
            }
        }

        mutating func scanLiteral(_ literal: StaticString) -> Bool {
            guard JSONLiteral.matches(literal, in: bytes, at: index) else { return false }
            index += literal.utf8CodeUnitCount
            return true
        }

        mutating func scanObject() -> Bool {
            scanList(closing: UInt8(ascii: "}")) { scanner in
                guard scanner.index < scanner.bytes.count, scanner.bytes[scanner.index] == UInt8(ascii: "\""), scanner.scanString() else {
                    return false
                }
                scanner.skipWhitespace()
                guard scanner.index < scanner.bytes.count, scanner.bytes[scanner.index] == UInt8(ascii: ":") else { return false }
                scanner.index += 1
                scanner.skipWhitespace()
                return scanner.scanValue()
            }
        }

        mutating func scanArray() -> Bool {
            scanList(closing: UInt8(ascii: "]")) { scanner in scanner.scanValue() }
        }

        /// `[` or `{` already at `index`: elements separated by commas up to `closing`, or empty.
        /// Depth is counted here so hostile nesting cannot overflow the stack.
        mutating func scanList(closing: UInt8, element: (inout Scanner) -> Bool) -> Bool {
            depth += 1
            defer { depth -= 1 }
            guard depth <= Self.maximumDepth else { return false }
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == closing {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard element(&self) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == closing {
                    index += 1
                    return true
                }
                return false
            }
        }

        /// A string; its bytes must be valid UTF-8 without raw control characters.
        mutating func scanString() -> Bool {
            index += 1
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { return false }
                    switch bytes[index] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        guard let unit = JSONString.hex4(bytes, at: index + 1) else { return false }
                        index += 5
                        // A lone UTF-16 surrogate escape is allowed by RFC 8259's grammar but no
                        // text can hold it: pusher-local, the client and hosted Pusher's parsers
                        // refuse it, so payloads with one are not JSON to the bridge either (they
                        // travel as strings instead of being refused with a 400; found by make fuzz).
                        if (0xDC00..<0xE000).contains(unit) { return false }
                        if (0xD800..<0xDC00).contains(unit) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u"),
                                let low = JSONString.hex4(bytes, at: index + 2), (0xDC00..<0xE000).contains(low)
                            else { return false }
                            index += 6
                        }
                    default:
                        return false
                    }
                case 0..<0x20:
                    return false
                case 0x80...:
                    guard let length = utf8SequenceLength(at: index) else { return false }
                    index += length
                default:
                    index += 1
                }
            }
            return false
        }

        /// The length of the well-formed UTF-8 sequence at `start`, or `nil` (Unicode Table 3-7).
        func utf8SequenceLength(at start: Int) -> Int? {
            let lead = bytes[start]
            func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
                start + offset < bytes.count && range.contains(bytes[start + offset])
            }
            switch lead {
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

        mutating func scanNumber() -> Bool {
            guard let end = JSONNumber.end(in: bytes, from: index) else { return false }
            index = end
            return true
        }
    }
}
