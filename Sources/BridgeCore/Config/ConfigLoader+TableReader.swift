import Backoff
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Reads one TOML table: typed getters that report problems against the table's key path, and
/// a final check for unknown keys.
struct TableReader {
    let table: TOMLTable
    let path: ConfigKeyPath
    let context: LoadContext

    func has(_ key: String) -> Bool { table[key] != nil }

    private func typeName(_ value: any TOMLValueConvertible) -> String {
        switch value.type {
        case .table: "a table"
        case .array: "an array"
        case .string: "a string"
        case .int: "an integer"
        case .double: "a floating-point number"
        case .bool: "a boolean"
        case .date, .time, .dateTime: "a date/time"
        }
    }

    private func mismatch(_ key: String, expected: String, found value: any TOMLValueConvertible) {
        context.report(path.key(key), "expected \(expected), found \(typeName(value))")
    }

    func missing(_ key: String) {
        context.report(path.key(key), "required key is missing")
    }

    /// Expands `${VAR}` in a string value.
    func expand(_ raw: String, at keyPath: ConfigKeyPath) -> String? {
        switch ConfigValueSyntax.expand(raw, environment: context.environment.variables) {
        case .success(let value): return value
        case .failure(let problem):
            context.report(keyPath, problem.description)
            return nil
        }
    }

    func string(_ key: String, required: Bool = false) -> String? {
        guard let value = table[key] else {
            if required { missing(key) }
            return nil
        }
        guard let raw = value.string else {
            mismatch(key, expected: "a string", found: value)
            return nil
        }
        return expand(raw, at: path.key(key))
    }

    /// A string that must not be empty.
    func nonEmptyString(_ key: String, required: Bool = false) -> String? {
        guard let value = string(key, required: required) else { return nil }
        if value.isEmpty {
            context.report(path.key(key), "must not be empty")
            return nil
        }
        return value
    }

    func int(_ key: String, in range: ClosedRange<Int>, unit: String = "") -> Int? {
        guard let value = table[key] else { return nil }
        // Decoded as Int and range-checked here: TOMLKit traps on out-of-range unsigned decoding (docs/swift-stack.md).
        guard let number = value.int else {
            mismatch(key, expected: "an integer", found: value)
            return nil
        }
        guard range.contains(number) else {
            context.report(path.key(key), "\(number) is out of range; must be \(range.lowerBound)…\(range.upperBound)\(unit)")
            return nil
        }
        return number
    }

    func port(_ key: String) -> Int? { int(key, in: 1...65535) }

    func qos(_ key: String) -> Int? {
        guard let value = table[key] else { return nil }
        guard let number = value.int else {
            mismatch(key, expected: "an integer (0, 1 or 2)", found: value)
            return nil
        }
        guard (0...2).contains(number) else {
            context.report(path.key(key), "QoS must be 0, 1 or 2, found \(number)")
            return nil
        }
        return number
    }

    func bool(_ key: String) -> Bool? {
        guard let value = table[key] else { return nil }
        guard let flag = value.bool else {
            mismatch(key, expected: "true or false", found: value)
            return nil
        }
        return flag
    }

    func double(_ key: String) -> Double? {
        guard let value = table[key] else { return nil }
        if let number = value.double { return number }
        if let number = value.int { return Double(number) }
        mismatch(key, expected: "a number", found: value)
        return nil
    }

    func duration(_ key: String, minimum: Duration = .zero, allowZero: Bool = false) -> Duration? {
        guard let value = table[key] else { return nil }
        guard let raw = value.string else {
            mismatch(key, expected: "a duration string like \"30s\"", found: value)
            return nil
        }
        guard let text = expand(raw, at: path.key(key)) else { return nil }
        switch ConfigValueSyntax.duration(text) {
        case .success(let duration):
            if duration == .zero, !allowZero {
                context.report(path.key(key), "must be greater than 0")
                return nil
            }
            if duration < minimum {
                context.report(path.key(key), "must be at least \(minimum)")
                return nil
            }
            return duration
        case .failure(let problem):
            context.report(path.key(key), problem.description)
            return nil
        }
    }

    func size(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let value = table[key] else { return nil }
        let bytes: Int
        if let number = value.int {
            bytes = number
        } else if let raw = value.string {
            guard let text = expand(raw, at: path.key(key)) else { return nil }
            switch ConfigValueSyntax.size(text) {
            case .success(let parsed): bytes = parsed
            case .failure(let problem):
                context.report(path.key(key), problem.description)
                return nil
            }
        } else {
            mismatch(key, expected: "a size like \"64MiB\"", found: value)
            return nil
        }
        guard range.contains(bytes) else {
            context.report(path.key(key), "\(bytes) bytes is out of range; must be \(range.lowerBound)…\(range.upperBound) bytes")
            return nil
        }
        return bytes
    }

    func choice<Choice: RawRepresentable & CaseIterable>(_ key: String, _: Choice.Type) -> Choice? where Choice.RawValue == String {
        guard let text = string(key) else { return nil }
        if let choice = Choice(rawValue: text) { return choice }
        let names = Choice.allCases.map(\.rawValue)
        var message = "\"\(text)\" is not one of \(names.map { "\"\($0)\"" }.joined(separator: ", "))"
        if let suggestion = Spelling.suggestion(for: text, among: names) { message += " (did you mean \"\(suggestion)\"?)" }
        context.report(path.key(key), message)
        return nil
    }

    func stringArray(_ key: String) -> [String]? {
        guard let value = table[key] else { return nil }
        guard let array = value.array else {
            mismatch(key, expected: "an array of strings", found: value)
            return nil
        }
        var strings: [String] = []
        for (index, element) in array.enumerated() {
            guard let raw = element.string else {
                context.report(path.key(key), "element \(index + 1) must be a string, found \(typeName(element))")
                return nil
            }
            guard let expanded = expand(raw, at: path.key(key)) else { return nil }
            strings.append(expanded)
        }
        return strings
    }

    /// An inline table of strings (`auth_headers = { Authorization = "Bearer ${TOKEN}" }`).
    func stringTable(_ key: String) -> [String: String]? {
        guard let value = table[key] else { return nil }
        guard let inner = value.table else {
            mismatch(key, expected: "a table of strings", found: value)
            return nil
        }
        var result: [String: String] = [:]
        for name in inner.keys {
            guard let raw = inner[name]?.string else {
                context.report(path.key(key).key(name), "expected a string")
                continue
            }
            if let expanded = expand(raw, at: path.key(key).key(name)) { result[name] = expanded }
        }
        return result
    }

    /// A table value rendered as JSON text (`user_info = { role = "bridge" }`).
    func jsonObject(_ key: String) -> String? {
        guard let value = table[key] else { return nil }
        guard value.table != nil else {
            mismatch(key, expected: "a table", found: value)
            return nil
        }
        var output: [UInt8] = []
        guard appendJSON(value, to: &output, at: path.key(key)) else { return nil }
        return String(decoding: output, as: UTF8.self)
    }

    private func appendJSON(_ value: any TOMLValueConvertible, to output: inout [UInt8], at keyPath: ConfigKeyPath) -> Bool {
        switch value.type {
        case .table:
            guard let inner = value.table else { return false }
            output.append(UInt8(ascii: "{"))
            for (index, name) in inner.keys.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                JSONText.appendString(name, to: &output)
                output.append(UInt8(ascii: ":"))
                guard let element = inner[name], appendJSON(element, to: &output, at: keyPath.key(name)) else { return false }
            }
            output.append(UInt8(ascii: "}"))
        case .array:
            guard let array = value.array else { return false }
            output.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                guard appendJSON(element, to: &output, at: keyPath) else { return false }
            }
            output.append(UInt8(ascii: "]"))
        case .string:
            guard let raw = value.string, let expanded = expand(raw, at: keyPath) else { return false }
            JSONText.appendString(expanded, to: &output)
        case .int:
            output.append(contentsOf: Array(String(value.int ?? 0).utf8))
        case .double:
            guard let number = value.double, number.isFinite else {
                context.report(keyPath, "JSON cannot hold inf or nan")
                return false
            }
            output.append(contentsOf: Array(String(number).utf8))
        case .bool:
            output.append(contentsOf: Array((value.bool == true ? "true" : "false").utf8))
        case .date, .time, .dateTime:
            context.report(keyPath, "dates and times are not supported here; write them as strings")
            return false
        }
        return true
    }

    func subtable(_ key: String) -> TableReader? {
        guard let value = table[key] else { return nil }
        guard let inner = value.table else {
            mismatch(key, expected: "a table", found: value)
            return nil
        }
        return TableReader(table: inner, path: path.key(key), context: context)
    }

    func tableArray(_ key: String) -> [TOMLTable]? {
        guard let value = table[key] else { return nil }
        guard let array = value.array else {
            mismatch(key, expected: "an array of tables ([[\(key)]])", found: value)
            return nil
        }
        var tables: [TOMLTable] = []
        for (index, element) in array.enumerated() {
            guard let inner = element.table else {
                context.report(path.key(key), "element \(index + 1) must be a table, found \(typeName(element))")
                continue
            }
            tables.append(inner)
        }
        return tables
    }

    /// A secret given inline (`key`) or read from a file (`key_file`); both at once is an error.
    func secret(_ key: String) -> Secret? {
        let fileKey = key + "_file"
        let inline = string(key)
        let filePath = string(fileKey)
        if has(key), has(fileKey) {
            context.report(path.key(fileKey), "set either \(key) or \(fileKey), not both")
            return nil
        }
        if let inline {
            if inline.isEmpty {
                context.report(path.key(key), "must not be empty")
                return nil
            }
            return Secret(inline)
        }
        guard let filePath else { return nil }
        let base = context.environment.variables["CREDENTIALS_DIRECTORY"] ?? context.configDirectory
        let resolved = context.resolve(filePath, against: base)
        guard let bytes = context.environment.readFile(resolved) else {
            context.report(path.key(fileKey), "cannot read secret file \(resolved)")
            return nil
        }
        guard var text = String(validating: bytes, as: UTF8.self) else {
            context.report(path.key(fileKey), "secret file \(resolved) is not valid UTF-8")
            return nil
        }
        if text.hasSuffix("\r\n") {
            text.removeLast(2)
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        if text.isEmpty {
            context.report(path.key(fileKey), "secret file \(resolved) is empty")
            return nil
        }
        return Secret(text)
    }

    /// A path to a file that must exist.
    func existingFile(_ key: String) -> String? {
        guard let raw = nonEmptyString(key) else { return nil }
        let resolved = context.resolve(raw, against: context.configDirectory)
        guard context.environment.fileExists(resolved) else {
            context.report(path.key(key), "file \(resolved) does not exist")
            return nil
        }
        return resolved
    }

    /// Reports every key not in `allowed`; `elsewhere` gives a better message for keys that exist
    /// but do not apply here (e.g. `retain` on a rule with `from = "mqtt"`).
    func rejectUnknownKeys(allowed: [String], elsewhere: [String: String] = [:]) {
        for key in table.keys where !allowed.contains(key) {
            if let explanation = elsewhere[key] {
                context.report(path.key(key), explanation)
                continue
            }
            var message = "unknown key '\(key)'"
            if let suggestion = Spelling.suggestion(for: key, among: allowed) { message += " (did you mean '\(suggestion)'?)" }
            context.report(path.key(key), message)
        }
    }
}
