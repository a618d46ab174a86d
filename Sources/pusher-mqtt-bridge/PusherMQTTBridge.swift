import ArgumentParser
import BridgeCore
import BridgeDaemon

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `pusher-mqtt-bridge`: the command line (docs/contract.md §3). Logic lives in BridgeCore
/// (`ConfigLoader`, `CheckReport`, `RouteExplanation`) so unit tests cover it; this file only
/// parses arguments, reads the clock and maps outcomes to sysexits codes. The entry point is
/// `main.swift`.
struct PusherMQTTBridge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pusher-mqtt-bridge",
        abstract: "Bridge Pusher Channels and MQTT.",
        version: BridgeCoreVersion.current,
        subcommands: [Run.self, Check.self, Route.self, Tap.self, Trigger.self, DeadLetters.self],
        defaultSubcommand: Run.self
    )
}

/// Exit codes (sysexits): 64 usage, 78 invalid config.
enum ExitStatus {
    static let usage = ExitCode(64)
    static let invalidConfig = ExitCode(78)
    /// 69 (EX_UNAVAILABLE): the daemon's control socket does not answer.
    static let unavailable = ExitCode(69)
}

/// `--config FILE`, shared by the subcommands.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "The config file (default: $PUSHER_MQTT_BRIDGE_CONFIG, else /etc/pusher-mqtt-bridge/bridges.conf).")
    var config: String?

    var path: String { ConfigLocation.resolve(explicit: config, environment: ProcessInfo.processInfo.environment) }

    /// The validated config, or the errors on stderr and exit 78.
    func load() throws -> BridgeConfiguration {
        do {
            return try ConfigLoader.load(path: path, environment: .process)
        } catch {
            StandardStream.error.write(error.description + "\n")
            throw ExitStatus.invalidConfig
        }
    }
}

/// `check`: validate, print the compiled rule table.
struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Validate the config and print the compiled rule table; exit 0 or 78.")

    @OptionGroup var options: ConfigOption

    func run() throws {
        let configuration = try options.load()
        print(CheckReport.render(configuration, file: options.path))
    }
}

/// `route`: explain what would happen to one message.
struct Route: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what would happen to one message: which rules match, the exact targets and payloads, or why not.")

    @OptionGroup var options: ConfigOption
    @Option(help: "Only this bridge.") var bridge: String?
    @Option(help: "An MQTT topic.") var topic: String?
    @Option(help: "The MQTT payload (with --topic).") var payload: String?
    @Option(help: "The MQTT QoS the message arrives with (with --topic).") var qos: Int = 0
    @Flag(help: "The MQTT message arrives with the retain flag (with --topic).") var retain = false
    @Option(help: "A Pusher channel.") var channel: String?
    @Option(help: "A Pusher event name (with --channel).") var event: String?
    @Option(help: "The event data (with --channel).") var data: String?
    @Option(name: .customLong("user-id"), help: "The sender's user_id (with --channel; client events on presence channels).")
    var userID: String?

    func validate() throws {
        if topic != nil, channel != nil || event != nil || data != nil || userID != nil {
            throw ValidationError("give either --topic [--payload] or --channel --event [--data], not both")
        }
        if topic == nil {
            guard channel != nil, event != nil else {
                throw ValidationError("give --topic T [--payload P], or --channel C --event E [--data D]")
            }
            if payload != nil || retain { throw ValidationError("--payload and --retain go with --topic") }
        }
        guard (0...2).contains(qos) else { throw ValidationError("--qos must be 0, 1 or 2") }
    }

    func run() throws {
        let configuration = try options.load()
        if let bridge, configuration.bridge(named: bridge) == nil {
            throw ValidationError("no bridge named \"\(bridge)\" in \(options.path)")
        }
        let now = UTCTimestamp(millisecondsSince1970: Int64((Date().timeIntervalSince1970 * 1000).rounded()))
        if let topic {
            print(
                RouteExplanation.explain(
                    topic: topic, payload: Array((payload ?? "").utf8), qos: qos, retain: retain, in: configuration, bridge: bridge,
                    receivedAt: now))
        } else if let channel, let event {
            print(
                RouteExplanation.explain(
                    channel: channel, event: event, data: data ?? "", userID: userID, in: configuration, bridge: bridge, receivedAt: now))
        }
    }
}
