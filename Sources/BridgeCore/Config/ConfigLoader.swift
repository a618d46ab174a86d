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
/// Keys, types and defaults (all keys are strict: an unknown key is an error, with a
/// "did you mean" hint):
///
/// | table | key | type | default |
/// |---|---|---|---|
/// | daemon | log_level | trace…error | info |
/// | daemon | log_format | text, json | text |
/// | daemon | metrics | "host:port" or "" | "127.0.0.1:9464" |
/// | daemon | state_dir | path | /var/lib/pusher-mqtt-bridge |
/// | daemon | shutdown_grace | duration | 5s |
/// | daemon | webhooks | "host:port" or "" | "" (off) |
/// | daemon | homeassistant | bool | false |
/// | daemon | homeassistant_prefix | topic, no empty levels | homeassistant |
/// | bridge | name | [a-z0-9_-]+ | required |
/// | bridge.pusher | key | string | required |
/// | bridge.pusher | app_id | string | required for `via = "http"` rules |
/// | bridge.pusher | secret / secret_file | secret | — |
/// | bridge.pusher | cluster / host, port, tls, rest_host, rest_port | | mt1, TLS, 443 |
/// | bridge.pusher | ca_file, auth_endpoint, auth_headers, user_id, user_info | | — |
/// | bridge.pusher | activity_timeout (≥ 1s), pong_timeout (≥ 100ms) | duration | 120s, 30s |
/// | bridge.pusher | encryption_master_key_base64 / _file | secret, 32 bytes | — |
/// | bridge.pusher | max_event_bytes | size | 10KiB |
/// | bridge.pusher | api_lanes | integer 1…64 | 8 |
/// | bridge.pusher | connections | integer 1…3 | 1 |
/// | bridge.mqtt | host, port, tls, ca_file, cert_file, key_file, tls_insecure | | localhost, 1883 |
/// | bridge.mqtt | client_id | string | pusher-mqtt-bridge-NAME |
/// | bridge.mqtt | username, password / password_file | | — |
/// | bridge.mqtt | protocol (4, 5), clean_session, keepalive (5s…65535s), session_expiry | | 5, false, 30s, 1h |
/// | bridge.mqtt | status_topic, dead_letter_topic | topic | pusher-mqtt-bridge/NAME/status, — |
/// | bridge.reconnect | initial_delay, max_delay, multiplier, jitter, stable_after | | 1s, 120s, 2.0, 0.2, 30s |
/// | bridge.buffer | max_messages, max_bytes, overflow, persist | | 100000, 64MiB, drop-oldest, true |
/// | bridge.webhooks | topic_prefix, events, qos | topic, event names, 0–2 | required, all seven, 1 |
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
