import Backoff
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Reads and validates `bridges.conf` (docs/contract.md §3–§4) into a ``BridgeConfiguration``, collecting
/// **every** problem rather than stopping at the first.
///
/// Every table's keys, with their defaults and meanings, are the one table of keys
/// (``ConfigKey/all``, ConfigKey.swift): an unknown key is an error, with a "did you mean" hint,
/// and docs/configuration.md is generated from the same table.
///
/// What the clients refuse when a bridge starts (`MQTTClientLimits`, `PusherClientLimits`) is
/// refused here too, at the key (ConfigLoader+ClientLimits.swift).
///
/// `*_file` paths that are relative resolve against `$CREDENTIALS_DIRECTORY` when it is set
/// (systemd `LoadCredential=`), else against the config file's directory; one trailing newline
/// is removed from the secret. Other relative paths resolve against the config file's directory.
public enum ConfigLoader {
    /// Reads `path` and validates it.
    public static func load(path: String, environment: ConfigEnvironment) throws(ConfigError) -> BridgeConfiguration {
        guard let bytes = environment.readFile(path) else {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: path, message: "cannot read the config file")])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: path, message: "the config file is not valid UTF-8")])
        }
        return try parse(text, file: path, environment: environment)
    }

    /// The line and column (1-based, in characters) of the first U+FEFF in `text`.
    static func byteOrderMark(in text: String) -> (line: Int, column: Int)? {
        var line = 1
        var column = 1
        for scalar in text.unicodeScalars {
            if scalar == "\u{FEFF}" { return (line, column) }
            if scalar == "\n" {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return nil
    }

    /// Validates `text`, naming it `file` in messages.
    public static func parse(_ text: String, file: String, environment: ConfigEnvironment) throws(ConfigError)
        -> BridgeConfiguration
    {
        // A UTF-8 byte order mark (editors on Windows write one) is not part of the TOML text; left
        // in, it hid a bad first header from the guards below and toml++ aborted (make fuzz).
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let text = text.utf8.starts(with: bom) ? String(decoding: text.utf8.dropFirst(3), as: UTF8.self) : text
        // Another one anywhere else (a second mark, or one pasted inside) is refused here: where
        // toml++ expects a key it aborts on it (make fuzz: two marks before a bad header).
        if let mark = Self.byteOrderMark(in: text) {
            throw ConfigError(diagnostics: [
                ConfigDiagnostic(
                    file: file, line: mark.line, column: mark.column,
                    message: "a byte order mark (U+FEFF) inside the file: only one is allowed, as its very first character")
            ])
        }
        let sourceMap = ConfigSourceMap(text: text)
        if let unsafe = sourceMap.unsafeHeader ?? ConfigSourceMap.unsafeValue(in: text) {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: file, line: unsafe.line, column: unsafe.column, message: unsafe.message)]
            )
        }
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError(diagnostics: [
                ConfigDiagnostic(file: file, line: error.source.begin.line, column: error.source.begin.column, message: error.description)
            ])
        } catch {
            throw ConfigError(diagnostics: [ConfigDiagnostic(file: file, message: "cannot parse TOML: \(error)")])
        }
        let context = LoadContext(file: file, sourceMap: sourceMap, environment: environment)
        let configuration = context.readRoot(root)
        if !context.diagnostics.isEmpty {
            // File order: by line, problems without a line after them (stable).
            let sorted = context.diagnostics.enumerated().sorted { a, b in
                switch (a.element.line, b.element.line) {
                case (let x?, let y?): return x != y ? x < y : a.offset < b.offset
                case (.some, .none): return true
                case (.none, .some): return false
                case (.none, .none): return a.offset < b.offset
                }
            }.map(\.element)
            throw ConfigError(diagnostics: sorted)
        }
        return configuration
    }
}
