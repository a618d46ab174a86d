import PusherProtocol
/// A parsed JSON value that keeps object members in their received order and numbers as their
/// original text, so a value can be passed on (client event data, `user_info`) unchanged in
/// meaning and as close to the received bytes as JSON allows.
///
/// pusher-local parses every frame and request body itself: Foundation's `JSONSerialization`
/// reorders keys and, on Linux, can turn `true` into `1` when re-encoding.
public enum JSONValue: Sendable, Equatable {
    /// `null`
    case null
    /// `true` / `false`
    case bool(Bool)
    /// A number, kept as its source text (e.g. `12`, `-1.5e3`).
    case number(String)
    /// A string, unescaped.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; members in received order (a repeated key keeps every occurrence).
    case object([JSONMember])

    /// The value of the first member named `key`, if this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// Compact JSON text of this value.
    public var encoded: String {
        var out = ""
        encode(into: &out)
        return out
    }

    func encode(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): out += jsonQuoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.encode(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                out += jsonQuoted(member.key)
                out += ":"
                member.value.encode(into: &out)
            }
            out += "}"
        }
    }

    /// Parses one JSON document; throws ``JSONParseError`` with the byte offset of the problem.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses one JSON document from UTF-8 bytes.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Equatable {
    public var key: String
    public var value: JSONValue

    public init(_ key: String, _ value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// Why a text is not JSON, with the byte offset where parsing stopped.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public var message: String
    /// Byte offset into the input.
    public var offset: Int

    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

/// A small recursive-descent JSON parser (RFC 8259) with a nesting limit, so a hostile frame
/// cannot exhaust the stack.
struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0
    static let maxDepth = 64

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the value") }
        return value
    }

    func fail(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: index) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of input") }
        guard JSONLiteral.matches(literal, in: bytes, at: index) else { throw fail("invalid literal") }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maxDepth { throw fail("nested deeper than \(Self.maxDepth) levels") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [JSONMember] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(JSONMember(key, value))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        guard let end = JSONNumber.end(in: bytes, from: index) else { throw fail("invalid number") }
        defer { index = end }
        return .number(String(decoding: bytes[index..<end], as: UTF8.self))
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard let value = JSONString.hex4(bytes, at: index) else { throw fail("invalid \\u escape") }
        index += 4
        return value
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var out: [UInt8] = []
        var runStart = index
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                out.append(contentsOf: bytes[runStart..<index])
                index += 1
                guard let string = String(validating: out, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8")
                }
                return string
            }
            if b < 0x20 { throw fail("control character in string") }
            if b == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[runStart..<index])
                index += 1
                guard index < bytes.count else { throw fail("unexpected end of input in escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if scalar >= 0xD800, scalar < 0xDC00 {
                        // A high surrogate must be followed by \u + low surrogate (RFC 8259 §7).
                        guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard low >= 0xDC00, low < 0xE000 else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00, scalar < 0xE000 {
                        throw fail("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw fail("invalid escape")
                }
                runStart = index
                continue
            }
            index += 1
        }
        throw fail("unterminated string")
    }
}

/// `s` as a JSON string literal (quotes included), escaping `"`, `\` and control characters.
public func jsonQuoted(_ s: String) -> String { JSONString.quoted(s) }
