import PusherProtocol

/// A small, allocation-light JSON reader for the shapes Pusher frames use.
///
/// Why not `JSONDecoder`: a frame's `data` must reach the application *exactly as received*
/// (docs/pusher-protocol.md §1 "Double encoding": a JSON string whose contents are handed over
/// unescaped, or — from some servers — an object whose raw text is handed over), and presence
/// `user_info` values are arbitrary JSON that we keep as text. `Codable` cannot give the raw
/// text of a value, and decoding every frame twice would halve throughput. This scanner walks a
/// value once, decodes strings, and returns every other value as its raw source text.
///
/// The grammar, the UTF-8 policy and the nesting limit are `PusherProtocol.JSONTokenizer`'s, the
/// same pusher-local's parser and the bridge's validator use: a `raw` value has been checked to
/// the last byte (`{"a":{]}` is refused, not handed on).
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

    // MARK: entry points

    /// The members of the JSON object `text`, in source order.
    static func objectMembers(of text: String) throws(Failure) -> [(key: String, value: Value)] {
        try read(text, readObject)
    }

    /// The elements of the JSON array `text`.
    static func arrayElements(of text: String) throws(Failure) -> [Value] {
        try read(text, readArray)
    }

    /// The object members of `text` keyed by name (the last duplicate wins).
    static func object(_ text: String) throws(Failure) -> [String: Value] {
        var dict: [String: Value] = [:]
        for (key, value) in try objectMembers(of: text) { dict[key] = value }
        return dict
    }

    /// The one JSON value of `bytes`, of any kind (the conformance tests and the fuzz targets
    /// read bytes that are not valid UTF-8 through here).
    static func document(_ bytes: [UInt8]) throws(Failure) -> Value {
        do {
            return try JSONTokenizer.withTokenizer(over: bytes) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                guard let first = try tokenizer.next() else { throw tokenizer.failure("unexpected end of input") }
                let value = try readValue(first, &tokenizer)
                try tokenizer.validateDocument()
                return value
            }
        } catch {
            throw Failure(message: error.message, offset: error.offset)
        }
    }

    // MARK: grammar (PusherProtocol.JSONTokenizer's, which checks every byte, `raw` values' too)

    private static func read<Output>(
        _ text: String, _ body: (inout JSONTokenizer) throws(JSONSyntaxError) -> Output
    ) throws(Failure) -> Output {
        do {
            return try JSONTokenizer.withTokenizer(over: text) { (tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) in
                let result = try body(&tokenizer)
                try tokenizer.validateDocument()
                return result
            }
        } catch {
            throw Failure(message: error.message, offset: error.offset)
        }
    }

    private static func readObject(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> [(key: String, value: Value)] {
        let first = try tokenizer.next()
        guard first?.kind == .beginObject else {
            throw JSONSyntaxError(message: "expected '{'", offset: first?.range.lowerBound ?? tokenizer.offset)
        }
        var members: [(key: String, value: Value)] = []
        while let token = try tokenizer.next(), token.kind == .memberName {
            let key = tokenizer.string(of: token)
            guard let valueToken = try tokenizer.next() else { throw tokenizer.failure("unexpected end of input") }
            members.append((key, try readValue(valueToken, &tokenizer)))
        }
        return members
    }

    private static func readArray(_ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> [Value] {
        let first = try tokenizer.next()
        guard first?.kind == .beginArray else {
            throw JSONSyntaxError(message: "expected '['", offset: first?.range.lowerBound ?? tokenizer.offset)
        }
        var elements: [Value] = []
        while let token = try tokenizer.next(), token.kind != .endArray {
            elements.append(try readValue(token, &tokenizer))
        }
        return elements
    }

    /// The value that `first` starts: strings decoded, anything else as its checked source text.
    private static func readValue(_ first: JSONToken, _ tokenizer: inout JSONTokenizer) throws(JSONSyntaxError) -> Value {
        switch first.kind {
        case .string: return .string(tokenizer.string(of: first))
        case .null: return .null
        default: return .raw(tokenizer.text(of: try tokenizer.skipValue(startingWith: first)))
        }
    }
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
