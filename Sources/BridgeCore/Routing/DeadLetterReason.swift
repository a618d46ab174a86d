import BridgeVocabulary
import MQTTVocabulary

/// Why a message matched by a rule cannot be delivered (docs/contract.md §5.2).
public enum DeadLetterReason: Sendable, Equatable, CustomStringConvertible {
    /// The rendered channel name breaks Pusher's channel-name rules.
    case invalidChannelName(String, problem: String)
    /// The rendered user id (`to_user`, `terminate_user`) breaks the user-id rules.
    case invalidUserID(String, problem: String)
    /// The rendered event name is too long or reserved.
    case invalidEventName(String, problem: String)
    /// The rendered topic cannot be published to.
    case invalidTopic(String, problem: String)
    /// The event data is larger than `max_event_bytes`.
    case dataTooLarge(bytes: Int, limit: Int)
    /// The MQTT payload is not UTF-8, so it cannot become Pusher event data.
    case invalidUTF8
    /// A placeholder has no value for this message (e.g. `{user_id}` on an event without a sender).
    case missingPlaceholderValue(String)
    /// A `{json:…}` placeholder or a `payload = "json:…"` projection found nothing usable at this
    /// pointer: missing, null, an object or array (in a name), or a payload that is not JSON (§7.3).
    case templateValueMissing(pointer: String, usage: String)
    /// The Pusher HTTP API refused the event (4xx other than 429); reported by the daemon.
    case rejectedByPusher(status: Int, body: String)

    /// A short stable label, for metrics (`outcome`) and log metadata.
    public var code: String {
        switch self {
        case .invalidChannelName: "invalid_channel"
        case .invalidUserID: "invalid_user"
        case .invalidEventName: "invalid_event"
        case .invalidTopic: "invalid_topic"
        case .dataTooLarge: "too_large"
        case .invalidUTF8: "invalid_utf8"
        case .missingPlaceholderValue: "missing_value"
        case .templateValueMissing: "template_value_missing"
        case .rejectedByPusher: "rejected"
        }
    }

    public var description: String {
        switch self {
        case .invalidChannelName(let name, let problem): "rendered channel \"\(name)\" is invalid: \(problem)"
        case .invalidUserID(let id, let problem): "rendered user id \"\(id)\" is invalid: \(problem)"
        case .invalidEventName(let name, let problem): "rendered event \"\(name)\" is invalid: \(problem)"
        case .invalidTopic(let topic, let problem): "rendered topic \"\(topic)\" is invalid: \(problem)"
        case .dataTooLarge(let bytes, let limit): "event data is \(bytes) bytes, over max_event_bytes (\(limit))"
        case .invalidUTF8: "payload is not valid UTF-8"
        case .missingPlaceholderValue(let placeholder): "the message has no value for {\(placeholder)}"
        case .templateValueMissing(let pointer, let usage):
            "the payload has no usable value at JSON Pointer \"\(pointer)\" for \(usage) (missing, null, not a scalar, or not JSON)"
        case .rejectedByPusher(let status, let body): "Pusher HTTP API answered \(status): \(body)"
        }
    }
}
