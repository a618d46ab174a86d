import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `[daemon]`: process-wide settings.
public struct DaemonSettings: Sendable, Equatable {
    /// `log_level`, default `info`.
    public var logLevel: LogLevelSetting
    /// `log_format`, default `text`.
    public var logFormat: LogFormat
    /// `metrics`, default `127.0.0.1:9464`; `nil` when set to `""` (off).
    public var metrics: ListenAddress?
    /// `state_dir`, default `/var/lib/pusher-mqtt-bridge` (the spool lives here).
    public var stateDirectory: String
    /// `shutdown_grace`, default 5 s: how long SIGTERM waits for buffers to drain.
    public var shutdownGrace: Duration
    /// `webhooks`: the one HTTP listener for every bridge's webhooks (docs/contract.md §7.2); `nil` (the default, `""`) = off.
    public var webhooks: ListenAddress?
    /// `control_socket`: the Unix socket `dead-letters redrive` talks to (docs/contract.md §8.3).
    public var controlSocket: ControlSocketSetting = .default
    /// `homeassistant` and `homeassistant_prefix`: Home Assistant discovery (docs/contract.md §8.3),
    /// off by default. Applied in place by a reload, unlike the other keys here.
    public var homeAssistant: HomeAssistantSettings

    /// Where the command line looks for the control socket, in order: ``controlSocketPath(environment:)``,
    /// then — for the default, when the command runs outside the unit (no `RUNTIME_DIRECTORY`) —
    /// `/run/pusher-mqtt-bridge/control.sock`, where the shipped unit's `RuntimeDirectory=` puts it.
    public func controlSocketCandidates(environment: [String: String]) -> [String] {
        guard let first = controlSocketPath(environment: environment) else { return [] }
        guard controlSocket == .default, environment["RUNTIME_DIRECTORY"] == nil else { return [first] }
        return [first, "/run/pusher-mqtt-bridge/control.sock"]
    }

    /// Where the control socket is: the key's path; by default `$RUNTIME_DIRECTORY/control.sock`
    /// (systemd's `RuntimeDirectory=`, its first path) when set, else `<state_dir>/control.sock`;
    /// nil when turned off (`""`).
    public func controlSocketPath(environment: [String: String]) -> String? {
        switch controlSocket {
        case .off: return nil
        case .path(let path): return path
        case .default:
            if let runtime = environment["RUNTIME_DIRECTORY"], let first = runtime.split(separator: ":").first, !first.isEmpty {
                return first.hasSuffix("/") ? "\(first)control.sock" : "\(first)/control.sock"
            }
            return stateDirectory.hasSuffix("/") ? "\(stateDirectory)control.sock" : "\(stateDirectory)/control.sock"
        }
    }

    public init(
        logLevel: LogLevelSetting = .info, logFormat: LogFormat = .text,
        metrics: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 9464),
        stateDirectory: String = "/var/lib/pusher-mqtt-bridge", shutdownGrace: Duration = .seconds(5), webhooks: ListenAddress? = nil,
        homeAssistant: HomeAssistantSettings = HomeAssistantSettings()
    ) {
        self.logLevel = logLevel
        self.logFormat = logFormat
        self.metrics = metrics
        self.stateDirectory = stateDirectory
        self.shutdownGrace = shutdownGrace
        self.webhooks = webhooks
        self.homeAssistant = homeAssistant
    }
}

/// `[daemon] control_socket`.
public enum ControlSocketSetting: Sendable, Equatable {
    /// Not set: `$RUNTIME_DIRECTORY/control.sock`, else `<state_dir>/control.sock`.
    case `default`
    /// `""`: no control socket (redrive unavailable).
    case off
    /// A path (relative paths resolve against the config file's directory).
    case path(String)
}
