import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// Which events of a channel a Pusher → MQTT rule takes.
public enum EventSelection: Sendable, Equatable {
    /// `["*"]`: every event except `pusher:*` / `pusher_internal:*`.
    case all
    /// Exactly these names.
    case named([String])

    /// Whether `event` is selected. Protocol events never are.
    public func contains(_ event: String) -> Bool {
        switch self {
        case .all: true
        case .named(let names): names.contains(event)
        }
    }
}
