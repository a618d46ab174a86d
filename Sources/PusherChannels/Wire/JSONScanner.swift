import PusherProtocol
/// A small, allocation-light JSON reader for the shapes Pusher frames use.
///
/// Why not `JSONDecoder`: a frame's `data` must reach the application *exactly as received*
/// (PUSHER-PROTOCOL §1 "Double encoding": a JSON string whose contents are handed over
/// unescaped, or — from some servers — an object whose raw text is handed over), and presence
/// `user_info` values are arbitrary JSON that we keep as text. `Codable` cannot give the raw
/// text of a value, and decoding every frame twice would halve throughput. This scanner walks a
/// value once, decodes strings, and returns every other value as its raw source text.
struct JSONScanner {
    /// One member value of an object or element of an array.
    enum Value: Equatable {
        /// A JSON string, unescaped.
        case string(String)
        /// `null`.
        case null
        /// Any other value (object, array, number, `true`/`false`) as its exact source text.
        case raw(String)

        /// The value as text: strings unescaped, `null` as `nil`, everything else raw.
        var text: String? {
            switch self {
            case .string(let s): s
            case .null: nil
            case .raw(let r): r
            }
        }

        /// Strings as they are, numbers as their source text (Pusher `user_id`s may be numbers).
        var stringOrNumber: String? {
            switch self {
            case .string(let s): s
            case .null: nil
            case .raw(let r):
                (r.first.map { $0 == "-" || $0.isNumber } ?? false) ? r : nil
            }
        }
    }

    /// Why a text is not the JSON we expected, with the byte offset.
    struct Failure: Error, Equatable, CustomStringConvertible {
        var message: String
        var offset: Int
        var description: String { "\(message) at byte \(offset)" }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.index = 0
    }

    // MARK: entry points

    /// The members of the JSON object `text`, in source order.
    static func objectMembers(of text: String) throws(Failure) -> [(key: String, value: Value)] {
        var copy = text
        let result: Result<[(key: String, value: Value)], Failure> = copy.withUTF8 { buffer in
            var scanner = JSONScanner(buffer)
            do throws(Failure) {
                let members = try scanner.readObject()
                try scanner.expectEnd()
                return .success(members)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The elements of the JSON array `text`.
    static func arrayElements(of text: String) throws(Failure) -> [Value] {
        var copy = text
        let result: Result<[Value], Failure> = copy.withUTF8 { buffer in
            var scanner = JSONScanner(buffer)
            do throws(Failure) {
                let elements = try scanner.readArray()
                try scanner.expectEnd()
                return .success(elements)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The object members of `text` keyed by name (the last duplicate wins).
    static func object(_ text: String) throws(Failure) -> [String: Value] {
        var dict: [String: Value] = [:]
        for (key, value) in try objectMembers(of: text) { dict[key] = value }
        return dict
    }

    // MARK: grammar

    private mutating func readObject() throws(Failure) -> [(key: String, value: Value)] {
        skipWhitespace()
        try expect(UInt8(ascii: "{"))
        var members: [(key: String, value: Value)] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return members
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let key = try readString()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            let value = try readValue()
            members.append((key, value))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return members
            default: throw fail("expected ',' or '}'")
            }
        }
    }

    private mutating func readArray() throws(Failure) -> [Value] {
        skipWhitespace()
        try expect(UInt8(ascii: "["))
        var elements: [Value] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return elements
        }
        while true {
            elements.append(try readValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return elements
            default: throw fail("expected ',' or ']'")
            }
        }
    }

    private mutating func readValue() throws(Failure) -> Value {
        skipWhitespace()
        guard let byte = peek() else { throw fail("unexpected end of input") }
        if byte == UInt8(ascii: "\"") { return .string(try readString()) }
        let start = index
        try skipValue()
        let raw = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if raw == "null" { return .null }
        return .raw(raw)
    }

    /// Skips one non-string value (object, array, number, literal), checking only its structure.
    private mutating func skipValue() throws(Failure) {
        guard let byte = peek() else { throw fail("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while let b = peek() {
                switch b {
                case UInt8(ascii: "\""):
                    try skipString()
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return
                    }
                default: break
                }
                index += 1
            }
            throw fail("unterminated object or array")
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        default:
            // Numbers are checked against the full grammar: a count read as `02` or `+2` would be
            // a number no other JSON reader agrees on (found by the http-reply fuzz target).
            guard let end = JSONNumber.end(in: bytes, from: index) else { throw fail("invalid number") }
            index = end
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Failure) {
        guard JSONLiteral.matches(literal, in: bytes, at: index) else { throw fail("invalid literal") }
        index += literal.utf8CodeUnitCount
    }

    private mutating func skipString() throws(Failure) {
        index += 1
        while let b = peek() {
            index += 1
            if b == UInt8(ascii: "\\") {
                index += 1
            } else if b == UInt8(ascii: "\"") {
                return
            }
        }
        throw fail("unterminated string")
    }

    /// Reads a string at `index` (which holds the opening quote), decoding escapes.
    private mutating func readString() throws(Failure) -> String {
        index += 1
        let start = index
        // Fast path: no escapes, the common case for names and most data.
        while let b = peek() {
            if b == UInt8(ascii: "\"") {
                let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            index += 1
        }
        guard peek() != nil else { throw fail("unterminated string") }
        var out: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while let b = peek() {
            index += 1
            switch b {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let e = peek() else { throw fail("unterminated escape") }
                index += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try readHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by \u and a low surrogate.
                        guard peek() == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("lone surrogate in \\u escape") }
                        index += 2
                        let low = try readHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("invalid surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("lone surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw fail("invalid escape")
                }
            default:
                out.append(b)
            }
        }
        throw fail("unterminated string")
    }

    private mutating func readHex4() throws(Failure) -> UInt32 {
        guard let value = JSONString.hex4(bytes, at: index) else { throw fail("invalid \\u escape") }
        index += 4
        return value
    }

    // MARK: primitives

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek() == byte else { throw fail("expected '\(Character(UnicodeScalar(byte)))'") }
        index += 1
    }

    private mutating func expectEnd() throws(Failure) {
        skipWhitespace()
        if index != bytes.count { throw fail("trailing characters after JSON value") }
    }

    private mutating func skipWhitespace() {
        while let b = peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { index += 1 }
    }

    private func fail(_ message: String) -> Failure { Failure(message: message, offset: index) }
}

/// JSON text building for the frames we send.
enum JSONText {
    /// `s` as a quoted JSON string.
    static func quoted(_ s: String) -> String { JSONString.quoted(s) }

    /// A JSON object from members whose values are already JSON text; `nil` values are left out.
    static func object(_ members: [(String, String?)]) -> String {
        var out = "{"
        var first = true
        for (key, value) in members {
            guard let value else { continue }
            if !first { out += "," }
            first = false
            out += quoted(key) + ":" + value
        }
        return out + "}"
    }
}
