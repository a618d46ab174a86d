import BridgeVocabulary
import MQTTVocabulary

/// Where an undeliverable message came from.
public enum MessageSource: Sendable, Equatable, CustomStringConvertible {
    /// An MQTT message on this topic.
    case mqtt(topic: String)
    /// A Pusher event on this channel.
    case pusher(channel: String, event: String)

    public var description: String {
        switch self {
        case .mqtt(let topic): "mqtt topic \"\(topic)\""
        case .pusher(let channel, let event): "pusher channel \"\(channel)\" event \"\(event)\""
        }
    }
}
