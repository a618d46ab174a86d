import Foundation
import Testing

@testable import BridgeCore

/// The one table of keys (Sources/BridgeCore/Config/ConfigKey*.swift) against the loader and
/// against docs/configuration.md, which is generated from it.
@Suite struct ConfigReferenceTests {
    static let referencePath = Fixture.repositoryRoot + "/docs/configuration.md"

    /// Expected: docs/configuration.md is exactly what the table generates. `make config-reference`
    /// writes it (this test with `WRITE_CONFIG_REFERENCE=1`).
    @Test func theReferenceIsGeneratedFromTheTable() throws {
        let generated = ConfigReference.markdown()
        if ProcessInfo.processInfo.environment["WRITE_CONFIG_REFERENCE"] == "1" {
            try generated.write(toFile: Self.referencePath, atomically: true, encoding: .utf8)
        }
        let onDisk = try String(contentsOfFile: Self.referencePath, encoding: .utf8)
        #expect(onDisk == generated, "docs/configuration.md differs from the table of keys: run `make config-reference`")
    }

    @Test func everyKeyIsListedOnceInItsTable() {
        var seen: Set<String> = []
        for key in ConfigKey.all {
            #expect(seen.insert("\(key.table.rawValue) \(key.name)").inserted, "\(key.table.rawValue) lists \(key.name) twice")
            #expect(!key.meaning.isEmpty && !key.defaultValue.isEmpty && !key.meaning.contains("|"), "\(key.name)")
        }
        #expect(Set(ConfigKey.Table.allCases).isSubset(of: Set(ConfigKey.all.map(\.table))))
    }

    /// The tables a key of `table` is written in, with what it needs beside it: one bridge whose
    /// `table` holds `line`.
    static func config(_ table: ConfigKey.Table, _ line: String, key: String) -> String {
        var pusher = [
            "key": "\"app-key\"", "app_id": "\"1\"", "secret": "\"app-secret\"", "host": "\"127.0.0.1\"", "port": "6001", "tls": "false",
        ]
        let mqtt = ["host": "\"127.0.0.1\""]
        var daemon: [String: String] = [:]
        var extra = ""
        let prefixKeys = ["discovery_interval", "max_channels", "idle_timeout"]
        switch table {
        case .daemon:
            break
        case .bridge, .pusher, .mqtt:
            break
        case .reconnect, .buffer:
            extra = "[bridge.\(table == .reconnect ? "reconnect" : "buffer")]\n\(line)\n\n"
        case .pusherRule:
            var rule = ["name": "\"r1\"", "from": "\"pusher\"", "channel": "\"c1\"", "topic": "\"t/{event}\""]
            if prefixKeys.contains(key) {
                rule["channel"] = nil
                rule["channel_prefix"] = "\"private-device-\""
            }
            extra = Self.table("[[bridge.rule]]", rule, key: key, line: line)
        case .mqttRule:
            var rule = ["name": "\"r1\"", "from": "\"mqtt\"", "topic": "\"in/+\"", "channel": "\"c-{1}\"", "event": "\"e\""]
            if key == "to_user" || key == "terminate_user" { rule["channel"] = nil }
            extra = Self.table("[[bridge.rule]]", rule, key: key, line: line)
        case .presence:
            var mirror = ["channel": "\"presence-room\"", "topic": "\"p/room\""]
            if prefixKeys.contains(key) {
                mirror["channel"] = nil
                mirror["channel_prefix"] = "\"presence-room-\""
                mirror["topic"] = "\"p/{suffix}\""
            }
            extra = Self.table("[[bridge.presence]]", mirror, key: key, line: line)
        case .webhooks:
            daemon["webhooks"] = "\"127.0.0.1:9465\""
            extra = Self.table("[bridge.webhooks]", ["topic_prefix": "\"hooks\""], key: key, line: line)
        case .cluster:
            extra = Self.table("[bridge.cluster]", ["group": "\"g\"", "instance": "\"a\""], key: key, line: line)
        case .users:
            pusher["sign_in"] = "true"
            extra = Self.table("[bridge.users]", ["topic": "\"users\""], key: key, line: line)
        }
        var text = ""
        if table == .daemon || !daemon.isEmpty {
            text += Self.table("[daemon]", daemon, key: key, line: table == .daemon ? line : nil)
        }
        let name = table == .bridge && key == "name" ? "" : "name = \"factory\"\n"
        text += "[[bridge]]\n\(name)" + (table == .bridge ? "\(line)\n" : "") + "\n"
        text += Self.table("[bridge.pusher]", pusher, key: key, line: table == .pusher ? line : nil)
        text += Self.table("[bridge.mqtt]", mqtt, key: key, line: table == .mqtt ? line : nil)
        return text + extra
    }

    private static func table(_ header: String, _ values: [String: String], key: String, line: String?) -> String {
        let rest = values.filter { $0.key != key || line == nil }.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }
        return "\(header)\n" + (rest + (line.map { [$0] } ?? [])).joined(separator: "\n") + "\n\n"
    }

    /// Expected: the base configs are valid, and for every key of the table a value of the wrong
    /// type is refused at that key — so the loader reads every key the reference lists (a key
    /// listed but never read would pass unnoticed).
    @Test func theLoaderReadsEveryKeyOfTheTable() {
        for table in ConfigKey.Table.allCases {
            #expect(Fixture.errors(Self.config(table, "", key: "")).isEmpty, "the base config of \(table.rawValue)")
        }
        let subtables: Set<String> = ["pusher", "mqtt", "reconnect", "buffer", "rule", "presence", "webhooks", "cluster", "users"]
        for key in ConfigKey.all where !(key.table == .bridge && subtables.contains(key.name)) {
            let errors = Fixture.errors(Self.config(key.table, "\(key.name) = [[1]]", key: key.name))
            #expect(
                errors.contains { $0.contains(".\(key.name): ") || $0.contains(" \(key.name): ") },
                "\(key.table.rawValue) \(key.name) = [[1]] was not refused at its key: \(errors)")
        }
    }

    @Test func anUnknownKeyIsRefusedWithTheNearestKnownOne() {
        let errors = Fixture.errors(Fixture.config(mqtt: "keepalve = \"30s\""))
        #expect(errors.count == 1)
        #expect(errors.first?.contains("keepalive") == true, "\(errors)")
    }
}
