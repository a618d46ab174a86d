/// Lines of table headers and `key =` lines in a TOML text, by key path.
///
/// TOMLKit 0.6.0 exposes no source positions after parsing, but docs/contract.md §3 asks for a line
/// wherever one can be known reliably. This scanner reads the same text the parser accepted and
/// records, for plain TOML, where each table (`[bridge.pusher]`), each element of an array of
/// tables (`[[bridge]]`, `[[bridge.rule]]`, numbered from 1 in file order) and each key starts.
/// Paths use the lookup form `bridge[1].rule[2].channel`. Keys inside inline tables are not
/// recorded: a lookup falls back to the nearest recorded ancestor (the `key = { … }` line).
struct ConfigSourceMap: Sendable {
    private(set) var lines: [String: Int] = [:]
    /// Where each `key = value` value starts: its line and the bytes of that line from the value on.
    private var values: [String: (line: Int, column: Int, text: ArraySlice<UInt8>)] = [:]

    /// A table header toml++ must not see: TOMLKit 0.6.0's toml++ *assumes* (debug: asserts and
    /// aborts the process; release: undefined behaviour) that a key starts right after `[`/`[[`.
    /// `[=]`, `[.a]`, `[#]` or a lone `[` would crash `check` — found by the robustness property
    /// test — so they are reported here as syntax errors and the parser is never called.
    private(set) var unsafeHeader: (line: Int, column: Int, message: String)?

    init(text: String) {
        var arrayCounts: [String: Int] = [:]
        var currentTable = ""
        var continuation = ValueScanner()
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = Array(rawLine.utf8)
            if continuation.isOpen {
                continuation.scan(line, from: 0)
                continue
            }
            var i = 0
            while i < line.count, line[i] == UInt8(ascii: " ") || line[i] == UInt8(ascii: "\t") { i += 1 }
            guard i < line.count else { continue }
            let first = line[i]
            if first == UInt8(ascii: "#") || first == UInt8(ascii: "\r") { continue }
            if first == UInt8(ascii: "[") {
                let isArray = i + 1 < line.count && line[i + 1] == UInt8(ascii: "[")
                let start = i + (isArray ? 2 : 1)
                if unsafeHeader == nil, let (column, shown) = Self.unsafeKeyStart(line, from: start) {
                    unsafeHeader = (
                        lineNumber, column,
                        "Error while parsing table header: expected bare key starting character or string delimiter, saw \(shown)"
                    )
                }
                guard let (keys, _) = Self.parseKey(line, from: start) else { continue }
                let resolved = Self.resolve(keys, arrayCounts: arrayCounts)
                // Implicitly created parent tables ([a.b] creates a) get this line if they have none.
                var prefix = ""
                for key in keys.dropLast() {
                    prefix = prefix.isEmpty ? key : prefix + "." + key
                    if arrayCounts[prefix] == nil, lines[prefix] == nil { lines[prefix] = lineNumber }
                    if let count = arrayCounts[prefix] { prefix += "[\(count)]" }
                }
                if isArray {
                    let count = (arrayCounts[resolved] ?? 0) + 1
                    arrayCounts[resolved] = count
                    currentTable = "\(resolved)[\(count)]"
                } else {
                    currentTable = resolved
                }
                if lines[currentTable] == nil { lines[currentTable] = lineNumber }
                continue
            }
            guard let (keys, afterKey) = Self.parseKey(line, from: i) else { continue }
            var j = afterKey
            while j < line.count, line[j] == UInt8(ascii: " ") || line[j] == UInt8(ascii: "\t") { j += 1 }
            guard j < line.count, line[j] == UInt8(ascii: "=") else { continue }
            var path = currentTable
            for key in keys {
                path = path.isEmpty ? key : path + "." + key
                if lines[path] == nil { lines[path] = lineNumber }
            }
            var valueStart = j + 1
            while valueStart < line.count, line[valueStart] == UInt8(ascii: " ") || line[valueStart] == UInt8(ascii: "\t") {
                valueStart += 1
            }
            if values[path] == nil {
                let column = line[..<valueStart].reduce(1) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
                values[path] = (lineNumber, column, line[valueStart...])
            }
            continuation = ValueScanner()
            continuation.scan(line, from: j + 1)
        }
    }

    /// Values toml++ in TOMLKit 0.6.0 *assumes* cannot occur (debug: asserts and aborts the
    /// process; release: undefined behaviour), both found by `make fuzz` (target config):
    /// - where an array expects a value but `}` follows (`a = [}`, `a = [0,}`, also across lines
    ///   and comments): `!is_value_terminator(*cp)` in `parse_value`;
    /// - a date followed by `T`/`t` and then not a digit (`1979-05-27T_7:32:00Z`, or a control
    ///   character there): `is_decimal_digit(*cp)` in `parse_time`.
    /// Returns 1-based line and column. A small scan of the whole text: strings (basic, literal,
    /// multi-line) and comments are skipped; table header lines are skipped; brackets opened in
    /// values are tracked.
    static func unsafeValue(in text: String) -> (line: Int, column: Int, message: String)? {
        let bytes = Array(text.utf8)
        var stack: [UInt8] = []
        var expectValue = false
        var line = 1
        var lineStart = 0
        var atLineStart = true
        var i = 0
        func skipString(_ quote: UInt8) {
            let triple = i + 2 < bytes.count && bytes[i + 1] == quote && bytes[i + 2] == quote
            i += triple ? 3 : 1
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\\"), quote == UInt8(ascii: "\"") {
                    i += 2
                    continue
                }
                if b == 0x0A {
                    if !triple { return }
                    line += 1
                    lineStart = i + 1
                }
                if b == quote {
                    if !triple {
                        i += 1
                        return
                    }
                    if i + 2 < bytes.count, bytes[i + 1] == quote, bytes[i + 2] == quote {
                        i += 3
                        return
                    }
                }
                i += 1
            }
        }
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case 0x0A:
                line += 1
                lineStart = i + 1
                atLineStart = true
                i += 1
                continue
            case 0x20, 0x09, 0x0D:
                i += 1
                continue
            case UInt8(ascii: "#"):
                while i < bytes.count, bytes[i] != 0x0A { i += 1 }
                continue
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                skipString(b)
                expectValue = false
                atLineStart = false
                continue
            default:
                break
            }
            if atLineStart, stack.isEmpty, b == UInt8(ascii: "[") {
                // A table header: its brackets are not values.
                while i < bytes.count, bytes[i] != 0x0A, bytes[i] != UInt8(ascii: "#") {
                    if bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") { skipString(bytes[i]) } else { i += 1 }
                }
                continue
            }
            atLineStart = false
            if let bad = Self.dateWithoutTime(bytes, at: i) {
                let column = String(decoding: bytes[lineStart..<bad], as: UTF8.self).unicodeScalars.count + 1
                let shown =
                    bytes[bad] >= 0x21 && bytes[bad] < 0x7F ? "'\(String(UnicodeScalar(bytes[bad])))'" : "a control or non-ASCII character"
                return (line, column, "Error while parsing date-time: expected 2-digit hour, saw \(shown)")
            }
            switch b {
            case UInt8(ascii: "["):
                stack.append(b)
                expectValue = true
            case UInt8(ascii: "{"):
                stack.append(b)
                expectValue = false
            case UInt8(ascii: ","):
                expectValue = stack.last == UInt8(ascii: "[")
            case UInt8(ascii: "}"):
                if expectValue, stack.last == UInt8(ascii: "[") {
                    let column = String(decoding: bytes[lineStart..<i], as: UTF8.self).unicodeScalars.count + 1
                    return (line, column, "Error while parsing array: expected value, saw '}'")
                }
                if !stack.isEmpty { stack.removeLast() }
                expectValue = false
            case UInt8(ascii: "]"):
                if !stack.isEmpty { stack.removeLast() }
                expectValue = false
            default:
                expectValue = false
            }
            i += 1
        }
        return nil
    }

    /// The index of the byte after `YYYY-MM-DDT` when `bytes` hold such a date at `start` (not
    /// inside a longer bare token) and that byte is not a digit; else `nil`.
    private static func dateWithoutTime(_ bytes: [UInt8], at start: Int) -> Int? {
        func digit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") }
        guard digit(start), start == 0 || !isBareKeyByte(bytes[start - 1]) else { return nil }
        let shape: [Bool] = [true, true, true, true, false, true, true, false, true, true]  // true: digit, false: '-'
        for (offset, wantsDigit) in shape.enumerated() {
            let i = start + offset
            guard i < bytes.count else { return nil }
            if wantsDigit ? !digit(i) : bytes[i] != UInt8(ascii: "-") { return nil }
        }
        let separator = start + 10
        guard separator < bytes.count, bytes[separator] == UInt8(ascii: "T") || bytes[separator] == UInt8(ascii: "t") else { return nil }
        let hour = separator + 1
        return hour < bytes.count && !digit(hour) ? hour : nil
    }

    /// The 1-based line and column in the file of the `offset`th character (1-based) of the
    /// string value at `path` — for errors inside a value, such as a `where` expression's syntax
    /// error (docs/contract.md §7.3). Escapes of basic strings (`\"`, `\u00e9`) count as the one
    /// character they decode to; for a multi-line string or a value that is not a string on one
    /// line, the column of the value's start. `nil` when the key was not recorded.
    func position(ofCharacter offset: Int, inValueAt path: String) -> (line: Int, column: Int)? {
        guard let value = values[path] else { return nil }
        let text = value.text
        guard let quote = text.first, quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'"),
            !(text.count >= 3 && text.dropFirst().prefix(2).allSatisfy { $0 == quote })
        else { return (value.line, value.column) }
        var index = text.startIndex + 1
        var decoded = 1
        while decoded < offset, index < text.endIndex, text[index] != quote {
            if quote == UInt8(ascii: "\""), text[index] == UInt8(ascii: "\\"), index + 1 < text.endIndex {
                switch text[index + 1] {
                case UInt8(ascii: "u"): index += 6
                case UInt8(ascii: "U"): index += 10
                default: index += 2
                }
            } else {
                index += 1
                while index < text.endIndex, text[index] & 0xC0 == 0x80 { index += 1 }
            }
            decoded += 1
        }
        let bytesBefore = text[text.startIndex..<min(index, text.endIndex)]
        let charactersBefore = bytesBefore.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
        return (value.line, value.column + charactersBefore)
    }

    /// The line of `path`, or of its nearest recorded ancestor (`a.b[2].c` → `a.b[2]` → `a`).
    func line(for path: String) -> Int? {
        var candidate = Substring(path)
        while true {
            if let line = lines[String(candidate)] { return line }
            guard let cut = candidate.lastIndex(where: { $0 == "." || $0 == "[" }) else { return nil }
            candidate = candidate[..<cut]
        }
    }

    /// Where a header's key should start but cannot (1-based column, what is there), or `nil` when
    /// it is a key start, a quote, or `]` (an empty key, which toml++ reports itself).
    private static func unsafeKeyStart(_ line: [UInt8], from start: Int) -> (Int, String)? {
        var i = start
        while i < line.count, line[i] == UInt8(ascii: " ") || line[i] == UInt8(ascii: "\t") { i += 1 }
        guard i < line.count, line[i] != UInt8(ascii: "\r") else {
            return (String(decoding: line[..<min(i, line.count)], as: UTF8.self).unicodeScalars.count + 1, "end of line")
        }
        let byte = line[i]
        if isBareKeyByte(byte) || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") || byte == UInt8(ascii: "]") { return nil }
        let column = String(decoding: line[..<i], as: UTF8.self).unicodeScalars.count + 1
        let shown = byte < 0x80 ? "'\(String(UnicodeScalar(byte)))'" : "a non-ASCII character"
        return (column, shown)
    }

    /// Replaces each prefix that names an array of tables by its latest element (`bridge` → `bridge[3]`).
    private static func resolve(_ keys: [String], arrayCounts: [String: Int]) -> String {
        var path = ""
        for (index, key) in keys.enumerated() {
            path = path.isEmpty ? key : path + "." + key
            if index < keys.count - 1, let count = arrayCounts[path] { path += "[\(count)]" }
        }
        return path
    }

    /// A dotted key (bare or quoted parts) starting at `start`; returns the parts and the index after it.
    private static func parseKey(_ line: [UInt8], from start: Int) -> ([String], Int)? {
        var keys: [String] = []
        var i = start
        while true {
            while i < line.count, line[i] == UInt8(ascii: " ") || line[i] == UInt8(ascii: "\t") { i += 1 }
            guard i < line.count else { return nil }
            if line[i] == UInt8(ascii: "\"") || line[i] == UInt8(ascii: "'") {
                let quote = line[i]
                var j = i + 1
                var bytes: [UInt8] = []
                while j < line.count, line[j] != quote {
                    if quote == UInt8(ascii: "\""), line[j] == UInt8(ascii: "\\"), j + 1 < line.count { j += 1 }
                    bytes.append(line[j])
                    j += 1
                }
                guard j < line.count else { return nil }
                keys.append(String(decoding: bytes, as: UTF8.self))
                i = j + 1
            } else {
                var j = i
                while j < line.count, isBareKeyByte(line[j]) { j += 1 }
                guard j > i else { return nil }
                keys.append(String(decoding: line[i..<j], as: UTF8.self))
                i = j
            }
            while i < line.count, line[i] == UInt8(ascii: " ") || line[i] == UInt8(ascii: "\t") { i += 1 }
            if i < line.count, line[i] == UInt8(ascii: ".") {
                i += 1
                continue
            }
            return (keys, i)
        }
    }

    private static func isBareKeyByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }
}

/// Follows a TOML value across lines: open brackets/braces and multi-line strings.
private struct ValueScanner {
    private enum StringState { case none, basic, literal, multiBasic, multiLiteral }
    private var depth = 0
    private var state = StringState.none

    var isOpen: Bool { depth > 0 || state == .multiBasic || state == .multiLiteral }

    mutating func scan(_ line: [UInt8], from start: Int) {
        var i = start
        let quote = UInt8(ascii: "\""), apostrophe = UInt8(ascii: "'")
        func triple(_ byte: UInt8, at index: Int) -> Bool {
            index + 2 < line.count && line[index] == byte && line[index + 1] == byte && line[index + 2] == byte
        }
        while i < line.count {
            let byte = line[i]
            switch state {
            case .basic:
                if byte == UInt8(ascii: "\\") { i += 1 } else if byte == quote { state = .none }
            case .literal:
                if byte == apostrophe { state = .none }
            case .multiBasic:
                if byte == UInt8(ascii: "\\") {
                    i += 1
                } else if triple(quote, at: i) {
                    state = .none
                    i += 2
                }
            case .multiLiteral:
                if triple(apostrophe, at: i) {
                    state = .none
                    i += 2
                }
            case .none:
                if triple(quote, at: i) {
                    state = .multiBasic
                    i += 2
                } else if triple(apostrophe, at: i) {
                    state = .multiLiteral
                    i += 2
                } else if byte == quote {
                    state = .basic
                } else if byte == apostrophe {
                    state = .literal
                } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
                    depth += 1
                } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
                    depth = max(0, depth - 1)
                } else if byte == UInt8(ascii: "#") {
                    return
                }
            }
            i += 1
        }
        // Single-line strings cannot continue onto the next line.
        if state == .basic || state == .literal { state = .none }
    }
}
