import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// `payload = "data" | "envelope" | "json:/pointer"` (docs/contract.md §5.1, §7.3).
public enum PayloadMode: Sendable, Equatable, CustomStringConvertible {
    /// The message body as is.
    case data
    /// A JSON object describing the message.
    case envelope
    /// Only the value at this pointer: a string as its content, anything else as its JSON text
    /// (a message without it is dead-lettered).
    case projection(JSONPointer)

    /// The pointer of a `json:` projection.
    public var projectionPointer: JSONPointer? {
        if case .projection(let pointer) = self { pointer } else { nil }
    }

    /// The value as written in `bridges.conf`.
    public var description: String {
        switch self {
        case .data: "data"
        case .envelope: "envelope"
        case .projection(let pointer): "json:" + pointer.source
        }
    }
}
