import ArgumentParser
import BridgeCore
import BridgeDaemon
import Dispatch
import Logging
import PusherChannels

#if canImport(FoundationEssentials)
    import FoundationEssentials
    import Glibc
#else
    import Foundation
#endif

/// `run`: the daemon, in the foreground (systemd runs it so).
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the daemon in the foreground (systemd runs it so).")

    @OptionGroup var options: ConfigOption
    @Option(name: .customLong("log-level"), help: "Override [daemon] log_level: trace, debug, info, notice, warning, error.")
    var logLevel: String?

    func validate() throws {
        if let logLevel, LogLevelSetting(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of \(LogLevelSetting.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    func run() async throws {
        // toml++ aborts the process on some malformed files that the loader's guards miss. Checked
        // in a child first, such a file is refused like any invalid config (exit 78, which the unit
        // does not restart), instead of a crash that systemd would restart again and again.
        let environment = ProcessInfo.processInfo.environment
        if case .crashed(let signal, let output) = await ConfigCheck().verdict(on: options.path, environment: environment) {
            let reason = "\(options.path): error: the config parser crashed on this file (signal \(ConfigCheck.describe(signal: signal)))"
            StandardStream.error.write(([reason] + output).joined(separator: "\n") + "\n")
            throw ExitStatus.invalidConfig
        }
        let configuration = try options.load()
        let level = logLevel.flatMap(LogLevelSetting.init(rawValue:)) ?? configuration.daemon.logLevel
        configuration.daemon.logFormat.bootstrap(level: level.loggerLevel)
        let logger = Logger(label: "pusher-mqtt-bridge")
        let daemon = Daemon(
            configPath: options.path,
            notifier: SystemdNotifier(environment: ProcessInfo.processInfo.environment),
            logger: logger
        )
        let status = await daemon.run(configuration: configuration)
        if status != .success { throw ExitCode(status.rawValue) }
    }
}

/// `tap`: print a channel's events as JSON lines.
struct Tap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Subscribe with a bridge's Pusher settings and print each event as one JSON line (mosquitto_sub for Pusher).")

    @OptionGroup var options: ConfigOption
    @Option(help: "The bridge whose Pusher settings to use (default: the first).") var bridge: String?
    @Option(help: "A channel to subscribe (repeatable).") var channel: [String] = []

    func validate() throws {
        if channel.isEmpty { throw ValidationError("give at least one --channel") }
    }

    func run() async throws {
        let configuration = try options.load()
        let settings = try pick(bridge, in: configuration, path: options.path)
        LogFormat.text.bootstrap(level: .info)
        let logger = Logger(label: "tap")
        let signals = AsyncStream.makeStream(of: Void.self)
        let sources = [SIGINT, SIGTERM].map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { signals.continuation.yield() }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await BridgeDaemon.Tap.run(settings: settings, channels: channel, logger: logger) { line in
                    StandardStream.output.write(line + "\n")
                }
            }
            group.addTask {
                for await _ in signals.stream { return }
            }
            try await group.next()
            group.cancelAll()
        }
    }
}

/// `trigger`: publish one event through the HTTP API.
struct Trigger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Publish one event through the Pusher HTTP API (mosquitto_pub for Pusher).")

    @OptionGroup var options: ConfigOption
    @Option(help: "The bridge whose Pusher settings to use (default: the first).") var bridge: String?
    @Option(help: "The channel.") var channel: String
    @Option(help: "The event name.") var event: String
    @Option(help: "The event data, sent as is.") var data: String

    func run() async throws {
        let configuration = try options.load()
        let settings = try pick(bridge, in: configuration, path: options.path)
        let logger = Logger(label: "trigger")
        guard let client = try BridgeClients.httpClient(for: settings, logger: logger) else {
            throw ValidationError("bridge \"\(settings.name)\" has no app_id and secret: the HTTP API needs both")
        }
        do {
            _ = try await client.trigger(channels: [channel], event: event, data: data)
        } catch {
            StandardStream.error.write("pusher-mqtt-bridge: trigger failed: \(error)\n")
            throw ExitCode.failure
        }
    }
}

/// The named bridge, or the first one.
func pick(_ name: String?, in configuration: BridgeConfiguration, path: String) throws -> BridgeSettings {
    if let name {
        guard let settings = configuration.bridge(named: name) else { throw ValidationError("no bridge named \"\(name)\" in \(path)") }
        return settings
    }
    guard let first = configuration.bridges.first else { throw ValidationError("\(path) defines no bridge") }
    return first
}
