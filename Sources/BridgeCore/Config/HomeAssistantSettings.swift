/// `[daemon] homeassistant` and `homeassistant_prefix`: Home Assistant MQTT discovery of the
/// bridges themselves (docs/contract.md §8.3). A change is applied in place by a reload: the
/// configs are published or removed, no bridge restarts.
public struct HomeAssistantSettings: Sendable, Equatable {
    /// `homeassistant`, default false.
    public var enabled: Bool
    /// `homeassistant_prefix`, default `homeassistant` (Home Assistant's discovery prefix): a topic
    /// without wildcards and without empty levels.
    public var prefix: String

    /// Home Assistant's own default discovery prefix.
    public static let defaultPrefix = "homeassistant"

    public init(enabled: Bool = false, prefix: String = HomeAssistantSettings.defaultPrefix) {
        self.enabled = enabled
        self.prefix = prefix
    }

    /// Where Home Assistant publishes its birth message (`online`) and its will (`offline`):
    /// `<prefix>/status`. An `online` there means it (re)started and wants every config again.
    public var birthTopic: String { "\(prefix)/status" }
}
