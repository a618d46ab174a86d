import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// A secret value (Pusher app secret, MQTT password, encryption key): never printed.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself; read it only where it is used.
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
