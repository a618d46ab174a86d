import BridgeCore
import Foundation

/// A `bridges.conf` for one bridge between a test's mosquitto and pusher-local (docs/contract.md §4),
/// with fast reconnects; `text` is the file, `parse()` loads it as the daemon does.
///
///     var conf = BridgesConf(pusherPort: pusher.port, mqttPort: broker.port, stateDirectory: directory)
///     conf.rules = [BridgesConf.mqttToPusher(name: "up", topic: "up/+", channel: "up-{1}", event: "reading")]
public struct BridgesConf: Sendable {
    public var name = "t"
    /// `[daemon] state_dir`: the spools live under it.
    public var stateDirectory: String
    /// `[daemon] metrics`; `""` (the default here) turns the operations endpoint off.
    public var metrics = ""
    public var shutdownGrace = "2s"
    public var pusherPort: Int
    public var pusherKey = "app-key"
    public var pusherAppID = "1"
    public var pusherSecret = "app-secret"
    public var mqttPort: Int
    /// A client id of this fixture only, so that two tests never share a broker session.
    public var mqttClientID = "bridge-test-\(UUID().uuidString.prefix(8))"
    public var keepAlive = "5s"
    public var initialDelay = "100ms"
    public var maxDelay = "500ms"
    public var persist = true
    /// `[[bridge.rule]]` tables (see ``mqttToPusher(name:topic:channel:event:qos:)`` and
    /// ``pusherToMQTT(name:channel:events:topic:qos:)``).
    public var rules: [String] = []
    /// More lines at the end of `[bridge.pusher]` and `[bridge.mqtt]`.
    public var pusherExtra: [String] = []
    public var mqttExtra: [String] = []

    public init(pusherPort: Int, mqttPort: Int, stateDirectory: String) {
        self.pusherPort = pusherPort
        self.mqttPort = mqttPort
        self.stateDirectory = stateDirectory
    }

    /// The file's text.
    public var text: String {
        var lines = [
            "[daemon]",
            "state_dir = \"\(stateDirectory)\"",
            "metrics = \"\(metrics)\"",
            "shutdown_grace = \"\(shutdownGrace)\"",
            "log_level = \"error\"",
            "",
            "[[bridge]]",
            "name = \"\(name)\"",
            "",
            "[bridge.pusher]",
            "key = \"\(pusherKey)\"",
            "app_id = \"\(pusherAppID)\"",
            "secret = \"\(pusherSecret)\"",
            "host = \"127.0.0.1\"",
            "port = \(pusherPort)",
            "tls = false",
        ]
        lines += pusherExtra
        lines += [
            "",
            "[bridge.mqtt]",
            "host = \"127.0.0.1\"",
            "port = \(mqttPort)",
            "client_id = \"\(mqttClientID)\"",
            "keepalive = \"\(keepAlive)\"",
        ]
        lines += mqttExtra
        lines += [
            "",
            "[bridge.reconnect]",
            "initial_delay = \"\(initialDelay)\"",
            "max_delay = \"\(maxDelay)\"",
            "jitter = 0.1",
            "",
            "[bridge.buffer]",
            "persist = \(persist)",
        ]
        for rule in rules { lines += ["", rule] }
        return lines.joined(separator: "\n") + "\n"
    }

    /// An MQTT → Pusher rule.
    public static func mqttToPusher(name: String, topic: String, channel: String, event: String, qos: Int = 1) -> String {
        """
        [[bridge.rule]]
        name = "\(name)"
        from = "mqtt"
        topic = "\(topic)"
        channel = "\(channel)"
        event = "\(event)"
        qos = \(qos)
        """
    }

    /// A Pusher → MQTT rule.
    public static func pusherToMQTT(name: String, channel: String, events: [String] = ["*"], topic: String, qos: Int = 1) -> String {
        """
        [[bridge.rule]]
        name = "\(name)"
        from = "pusher"
        channel = "\(channel)"
        events = [\(events.map { "\"\($0)\"" }.joined(separator: ", "))]
        topic = "\(topic)"
        qos = \(qos)
        """
    }

    /// Loads ``text`` as the daemon loads its file (no environment variables, no other files).
    public func parse() throws -> BridgeConfiguration {
        try ConfigLoader.parse(text, file: "bridges.conf", environment: .empty)
    }

    /// Writes ``text`` to `path`.
    public func write(to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else {
            throw TestFailure("cannot write \(path)")
        }
    }
}

extension ConfigEnvironment {
    /// No environment variables and no files: a config that names a variable or a file fails to load.
    public static var empty: ConfigEnvironment {
        ConfigEnvironment(variables: [:], readFile: { _ in nil }, fileExists: { _ in false })
    }
}

/// A fresh directory under the system's temporary directory (the caller removes it).
public func temporaryDirectory(_ prefix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
