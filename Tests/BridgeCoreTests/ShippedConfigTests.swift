import Foundation
import Testing

@testable import BridgeCore

@Suite("The shipped bridges.conf")
struct ShippedConfigTests {
    static var path: String { Fixture.repositoryRoot + "/bridges.conf" }

    static func load() throws -> BridgeConfiguration {
        try ConfigLoader.load(path: path, environment: Fixture.realFileSystem(variables: [:]))
    }

    @Test func loadsAndValidates() throws {
        let configuration = try Self.load()
        let bridge = try #require(configuration.bridge(named: "demo"))
        #expect(bridge.pusher.host == "127.0.0.1")
        #expect(bridge.pusher.port == 6001)
        #expect(!bridge.pusher.useTLS)
        #expect(bridge.pusher.key == "app-key")
        #expect(bridge.pusher.appID == "1")
        #expect(bridge.pusher.secret?.value == "app-secret")
        #expect(bridge.mqtt.host == "127.0.0.1")
        #expect(bridge.mqtt.port == 1883)
        #expect(configuration.daemon.stateDirectory == Fixture.repositoryRoot + "/run/state")
        let underSystemd = try ConfigLoader.load(
            path: Self.path, environment: Fixture.realFileSystem(variables: ["STATE_DIRECTORY": "/var/lib/pusher-mqtt-bridge"]))
        #expect(underSystemd.daemon.stateDirectory == "/var/lib/pusher-mqtt-bridge")
        #expect(bridge.reconnect.maxDelay == .seconds(30))
        #expect(bridge.buffer.maxBytes == 16 * 1024 * 1024)
        // The demo shows every kind of rule: Pusher -> MQTT, MQTT -> Pusher with '+', a bidirectional pair, presence.
        #expect(bridge.pusherToMQTTRules.map(\.name) == ["prices", "lights-to-mqtt"])
        #expect(bridge.mqttToPusherRules.map(\.name) == ["temperatures", "lights-to-pusher"])
        #expect(bridge.mqttToPusherRules[0].filter.singleLevelWildcards == 1)
        #expect(bridge.presence.map(\.channel) == ["presence-operators"])
        #expect(bridge.pusherChannels == ["market-data", "private-lights", "presence-operators"])
    }

    @Test func checkReportShowsTheRuleTable() throws {
        let report = CheckReport.render(try Self.load(), file: "bridges.conf")
        #expect(report.hasPrefix("bridges.conf: valid — 1 bridge, 4 rules, 1 presence mirror"))
        // The table row of the rule, split into its columns (two or more spaces apart).
        let row = try #require(report.split(separator: "\n").first { $0.hasPrefix("  temperatures ") })
        let columns = row.split(separator: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        #expect(
            columns == [
                "temperatures", "mqtt -> pusher", "topic sensors/+/temperature", "channel sensor-{1} event temperature via http", "1",
                "not forwarded", "envelope",
            ])
        #expect(report.contains("sensors/+/temperature (qos 1, no_local, retained: no)"))
        #expect(!report.contains("app-secret"))
    }

    @Test func routeExplainsAnMQTTMessage() throws {
        let text = RouteExplanation.explain(
            topic: "sensors/kitchen/temperature", payload: Array("21.5".utf8), in: try Self.load(), receivedAt: Fixture.time)
        #expect(text.contains("rule temperatures: MATCH -> pusher channel \"sensor-kitchen\" event \"temperature\" via http"))
        #expect(
            text.contains(
                #"data (118 bytes): {"topic":"sensors/kitchen/temperature","payload":21.5,"qos":0,"retain":false,"received_at":"2026-11-18T11:06:40.123Z"}"#
            ))
        #expect(
            text.contains("rule lights-to-pusher: no match (filter \"home/lights/+\"): level 1 is \"sensors\", the filter wants \"home\""))
    }

    @Test func routeExplainsWhyNothingMatchesAndDeadLetters() throws {
        let configuration = try Self.load()
        let none = RouteExplanation.explain(topic: "sensors/kitchen/humidity", payload: [], in: configuration, receivedAt: Fixture.time)
        #expect(none.contains("level 3 is \"humidity\", the filter wants \"temperature\""))
        #expect(none.contains("=> nothing is sent: no rule matches"))
        let dead = RouteExplanation.explain(
            topic: "sensors/living room/temperature", payload: [], in: configuration, receivedAt: Fixture.time)
        #expect(dead.contains("rule temperatures: MATCH, DEAD LETTER: rendered channel \"sensor-living room\" is invalid"))
        #expect(dead.contains("would be published to pusher-mqtt-bridge/demo/dead-letter: {\"reason\":"))
    }

    @Test func routeExplainsAPusherEvent() throws {
        let configuration = try Self.load()
        let text = RouteExplanation.explain(
            channel: "market-data", event: "new-price", data: #"{"eur":2}"#, in: configuration, receivedAt: Fixture.time)
        #expect(text.contains("rule prices: MATCH -> mqtt topic \"dash/prices/new-price\" qos 1"))
        #expect(text.contains("user properties: pusher-channel=market-data, pusher-event=new-price"))
        let other = RouteExplanation.explain(
            channel: "market-data", event: "old-price", data: "", in: configuration, receivedAt: Fixture.time)
        #expect(other.contains("rule prices: no match: takes only events \"new-price\""))
    }
}

/// Runs the built `pusher-mqtt-bridge` binary (built next to the test bundle by `swift build --build-tests`).
@Suite("The pusher-mqtt-bridge command line")
struct CommandLineTests {
    static func binary() throws -> String {
        let testBinary = try #require(try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        var directory = URL(fileURLWithPath: testBinary).deletingLastPathComponent()
        // Swift Testing may run from inside the .xctest bundle directory on some layouts.
        for _ in 0..<3 {
            let candidate = directory.appendingPathComponent("pusher-mqtt-bridge").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        Issue.record("pusher-mqtt-bridge binary not found near \(testBinary); run `swift build --build-tests` first")
        throw CancellationError()
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try binary())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: ConfigLocation.environmentVariable)
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    @Test func checkOnTheShippedConfigExitsZero() throws {
        let result = try Self.run(["check", "--config", ShippedConfigTests.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("valid — 1 bridge, 4 rules, 1 presence mirror"))
    }

    @Test func checkOnABadConfigExits78WithEveryError() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString).conf").path
        try "[daemon]\nlog_level = \"loud\"\n[[bridge]]\nname = \"x\"\n[bridge.pusher]\nkey = \"k\"\nport = 99999\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let result = try Self.run(["check", "--config", file])
        #expect(result.status == 78)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "\(file):2: error: daemon.log_level: \"loud\" is not one of \"trace\", \"debug\", \"info\", \"notice\", \"warning\", \"error\"",
                "\(file):7: error: bridge.x.pusher.port: 99999 is out of range; must be 1…65535",
            ])
    }

    @Test func missingConfigFileExits78() throws {
        let result = try Self.run(["check", "--config", "/nonexistent/bridges.conf"])
        #expect(result.status == 78)
        #expect(result.stderr == "/nonexistent/bridges.conf: error: cannot read the config file\n")
    }

    @Test func routeNeedsATopicOrAChannelAndEvent() throws {
        #expect(try Self.run(["route", "--config", ShippedConfigTests.path]).status == 64)
        #expect(try Self.run(["route", "--config", ShippedConfigTests.path, "--topic", "a", "--channel", "b"]).status == 64)
        let routed = try Self.run(["route", "--config", ShippedConfigTests.path, "--topic", "home/lights/on", "--payload", "1"])
        #expect(routed.status == 0)
        #expect(routed.stdout.contains("rule lights-to-pusher: MATCH -> pusher channel \"private-lights\" event \"on\" via http"))
    }

    @Test func versionAndUsageErrors() throws {
        let version = try Self.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout == BridgeCoreVersion.current + "\n")
        // tap needs a channel, trigger its three options: usage errors (64) before any config is read.
        #expect(try Self.run(["tap", "--config", ShippedConfigTests.path]).status == 64)
        #expect(try Self.run(["trigger", "--config", ShippedConfigTests.path, "--channel", "c"]).status == 64)
        #expect(try Self.run(["run", "--config", ShippedConfigTests.path, "--log-level", "loud"]).status == 64)
        // A config that is not there: 78, for run as for check.
        #expect(try Self.run(["run", "--config", "/nonexistent/bridges.conf"]).status == 78)
    }
}
