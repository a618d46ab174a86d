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
    /// `homeassistant` and `homeassistant_prefix`: Home Assistant discovery (docs/contract.md §8.3),
    /// off by default. Applied in place by a reload, unlike the other keys here.
    public var homeAssistant: HomeAssistantSettings

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
