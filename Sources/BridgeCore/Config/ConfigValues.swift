/// Parsing of the value syntaxes docs/contract.md §4 defines on top of TOML: durations, sizes and
/// `${VAR}` expansion. Each parser returns either the value or a sentence saying what is wrong.
public enum ConfigValueSyntax {
    /// `"500ms"`, `"30s"`, `"2m"`, `"1h"`, also combined (`"1m30s"`) and fractional (`"1.5s"`).
    public static func duration(_ text: String) -> Result<Duration, ConfigValueProblem> {
        let trimmed = text.trimmingSpaces()
        guard !trimmed.isEmpty else {
            return .failure(.init("expected a duration like \"500ms\", \"30s\", \"2m\" or \"1h\", found an empty string"))
        }
        var nanoseconds: Double = 0
        var scalars = Substring(trimmed)
        while !scalars.isEmpty {
            let numberPart = scalars.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            var rest = scalars.dropFirst(numberPart.count)
            while rest.first == " " { rest = rest.dropFirst() }
            let unitPart = rest.prefix { $0.isLetter || $0 == "µ" }
            guard !numberPart.isEmpty, let number = Double(numberPart), !unitPart.isEmpty else {
                return .failure(.init("\"\(text)\" is not a duration; write e.g. \"500ms\", \"30s\", \"2m\" or \"1h\""))
            }
            let scale: Double
            switch unitPart {
            case "ns": scale = 1
            case "us", "µs": scale = 1e3
            case "ms": scale = 1e6
            case "s": scale = 1e9
            case "m": scale = 60e9
            case "h": scale = 3600e9
            default:
                return .failure(.init("unknown duration unit \"\(unitPart)\" in \"\(text)\"; use ms, s, m or h"))
            }
            nanoseconds += number * scale
            scalars = rest.dropFirst(unitPart.count)
            while scalars.first == " " { scalars = scalars.dropFirst() }
        }
        guard nanoseconds.isFinite, nanoseconds < 1e18 else {
            return .failure(.init("duration \"\(text)\" is too long"))
        }
        return .success(.nanoseconds(Int64(nanoseconds.rounded())))
    }

    /// `"64KiB"`, `"64MiB"`, `"1GiB"`, `"10KB"` (SI, ×1000), `"512B"` or `"512"`.
    public static func size(_ text: String) -> Result<Int, ConfigValueProblem> {
        let trimmed = text.trimmingSpaces()
        let numberPart = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let unit = trimmed.dropFirst(numberPart.count).trimmingSpaces()
        guard !numberPart.isEmpty, let number = Double(numberPart) else {
            return .failure(.init("\"\(text)\" is not a size; write e.g. \"64KiB\", \"64MiB\" or \"1GiB\""))
        }
        let scale: Double
        switch unit {
        case "", "B": scale = 1
        case "KiB": scale = 1024
        case "MiB": scale = 1024 * 1024
        case "GiB": scale = 1024 * 1024 * 1024
        case "KB", "kB": scale = 1000
        case "MB": scale = 1_000_000
        case "GB": scale = 1_000_000_000
        default:
            return .failure(.init("unknown size unit \"\(unit)\" in \"\(text)\"; use B, KiB, MiB, GiB (or KB, MB, GB)"))
        }
        let bytes = number * scale
        guard bytes.isFinite, bytes < 1e15 else { return .failure(.init("size \"\(text)\" is too large")) }
        return .success(Int(bytes.rounded()))
    }

    /// Expands `${NAME}` from `environment`. `${NAME:-fallback}` uses `fallback` when `NAME` is
    /// unset or empty (as in the shell). `$${` writes a literal `${`. An unset variable without a
    /// fallback, an unclosed `${` or an invalid name is a problem (docs/contract.md §4: "unset → config error").
    public static func expand(_ text: String, environment: [String: String]) -> Result<String, ConfigValueProblem> {
        guard text.contains("${") else { return .success(text) }
        var output = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if character == "$" {
                let next = text.index(after: index)
                if next < text.endIndex, text[next] == "$",
                    text.index(after: next) < text.endIndex, text[text.index(after: next)] == "{"
                {
                    output += "$"
                    index = text.index(after: next)
                    continue
                }
                if next < text.endIndex, text[next] == "{" {
                    let nameStart = text.index(after: next)
                    guard let close = text[nameStart...].firstIndex(of: "}") else {
                        return .failure(.init("unclosed \"${\" in \"\(text)\""))
                    }
                    let reference = String(text[nameStart..<close])
                    var name = reference
                    var fallback: String?
                    if let separator = reference.firstRange(of: ":-") {
                        name = String(reference[..<separator.lowerBound])
                        fallback = String(reference[separator.upperBound...])
                    }
                    guard isVariableName(name) else {
                        return .failure(.init("\"${\(reference)}\" is not a valid environment variable reference"))
                    }
                    if let value = environment[name], !(fallback != nil && value.isEmpty) {
                        output += value
                    } else if let fallback {
                        output += fallback
                    } else {
                        return .failure(.init("environment variable \(name) is not set"))
                    }
                    index = text.index(after: close)
                    continue
                }
            }
            output.append(character)
            index = text.index(after: index)
        }
        return .success(output)
    }

    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else {
            return false
        }
        return name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
    }
}

/// Why a config value could not be parsed, as one sentence.
public struct ConfigValueProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
