import BridgeVocabulary
import MQTTVocabulary

/// What the rule table decided for one MQTT message.
public struct MQTTMessageRouting: Sendable, Equatable {
    /// Events to publish into Pusher, in rule order.
    public var events: [PusherEventPublish] = []
    /// Matches that cannot be delivered.
    public var deadLetters: [DeadLetter] = []
    /// Matches deliberately not forwarded.
    public var skipped: [SkippedMatch] = []
    /// Rules whose filter matched but whose `where` did not (outcome `filtered`).
    public var filtered: [String] = []
    public init() {}
    /// Whether no rule matched at all.
    public var isUnmatched: Bool { events.isEmpty && deadLetters.isEmpty && skipped.isEmpty && filtered.isEmpty }
}
