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
        do {
            return try JSONTokenizer.withTokenizer(over: text) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                try JSONTreeBuilder.document(&tokenizer)
            }
        } catch {
            throw JSONParseError(message: error.message, offset: error.offset)
        }
    }

    /// Parses one JSON document from UTF-8 bytes (`PusherProtocol.JSONTokenizer`'s grammar,
    /// UTF-8 policy and nesting limit).
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        do {
            return try JSONTokenizer.withTokenizer(over: bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                try JSONTreeBuilder.document(&tokenizer)
            }
        } catch {
            throw JSONParseError(message: error.message, offset: error.offset)
        }
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

/// Builds a ``JSONValue`` from the tokenizer's tokens with its own stack of open containers, so
/// a deeply nested document costs no recursion while it is read.
enum JSONTreeBuilder {
    /// An object or array being read.
    struct OpenContainer {
        /// Whether it is an object (else an array).
        var isObject: Bool
        /// Its values so far.
        var values: [JSONValue] = []
        /// An object's member names so far (the last may still wait for its value).
        var names: [String] = []
    }

    /// The document the tokenizer is at the start of.
    static func document(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> JSONValue {
        var open: [OpenContainer] = []
        var root: JSONValue?
        func add(_ value: JSONValue) {
            if open.isEmpty {
                root = value
            } else {
                open[open.count - 1].values.append(value)
            }
        }
        while let token = try tokenizer.next() {
            switch token.kind {
            case .beginObject: open.append(OpenContainer(isObject: true))
            case .beginArray: open.append(OpenContainer(isObject: false))
            case .memberName: open[open.count - 1].names.append(tokenizer.string(of: token))
            case .endObject, .endArray:
                let container = open.removeLast()
                if container.isObject {
                    add(.object(zip(container.names, container.values).map { JSONMember($0, $1) }))
                } else {
                    add(.array(container.values))
                }
            case .string: add(.string(tokenizer.string(of: token)))
            case .number: add(.number(tokenizer.text(of: token.range)))
            case .true: add(.bool(true))
            case .false: add(.bool(false))
            case .null: add(.null)
            }
        }
        guard let root else { throw tokenizer.failure("unexpected end of input") }
        return root
    }
}

/// `s` as a JSON string literal (quotes included), escaping `"`, `\` and control characters.
public func jsonQuoted(_ s: String) -> String { JSONString.quoted(s) }
