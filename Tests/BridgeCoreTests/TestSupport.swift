import Foundation
import Testing

@testable import BridgeCore

/// Helpers shared by the BridgeCore tests.
enum Fixture {
    /// The repository root (this file is Tests/BridgeCoreTests/TestSupport.swift).
    static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// An environment with the given variables and an in-memory file system.
    static func environment(variables: [String: String] = [:], files: [String: String] = [:]) -> ConfigEnvironment {
        ConfigEnvironment(
            variables: variables,
            readFile: { path in files[path].map { Array($0.utf8) } },
            fileExists: { path in files[path] != nil })
    }

    /// The real file system (BridgeCore has none of its own) with the given variables.
    static func realFileSystem(variables: [String: String]) -> ConfigEnvironment {
        ConfigEnvironment(
            variables: variables,
            readFile: { path in FileManager.default.contents(atPath: path).map { [UInt8]($0) } },
            fileExists: { path in FileManager.default.fileExists(atPath: path) })
    }

    /// A minimal valid config with `extra` appended (rules, presence mirrors, …).
    static func config(pusher: String = "", mqtt: String = "", extra: String = "") -> String {
        """
        [[bridge]]
        name = "factory"

        [bridge.pusher]
        key = "app-key"
        app_id = "1"
        secret = "app-secret"
        host = "127.0.0.1"
        port = 6001
        tls = false
        \(pusher)

        [bridge.mqtt]
        host = "127.0.0.1"
        \(mqtt)

        \(extra)
        """
    }

    static func parse(_ text: String, environment: ConfigEnvironment = Fixture.environment()) throws -> BridgeConfiguration {
        try ConfigLoader.parse(text, file: "/etc/bridges.conf", environment: environment)
    }

    /// The diagnostics of an invalid config, as printed.
    static func errors(_ text: String, environment: ConfigEnvironment = Fixture.environment()) -> [String] {
        do {
            _ = try ConfigLoader.parse(text, file: "/etc/bridges.conf", environment: environment)
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    static let time = UTCTimestamp(millisecondsSince1970: 1_795_000_000_123)
}
