import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// One `[[bridge.rule]]`.
public enum BridgeRule: Sendable, Equatable {
    /// `from = "pusher"`.
    case pusherToMQTT(PusherToMQTTRule)
    /// `from = "mqtt"`.
    case mqttToPusher(MQTTToPusherRule)

    /// `where`, `throttle`, `on_change` of the rule.
    public var conditions: PayloadConditions {
        switch self {
        case .pusherToMQTT(let rule): rule.conditions
        case .mqttToPusher(let rule): rule.conditions
        }
    }

    /// The rule's name.
    public var name: String {
        switch self {
        case .pusherToMQTT(let rule): rule.name
        case .mqttToPusher(let rule): rule.name
        }
    }
}
