import BridgeVocabulary
import MQTTVocabulary

/// What the rule table decided for one Pusher event.
public struct PusherEventRouting: Sendable, Equatable {
    /// Messages to publish to MQTT, in rule order.
    public var publishes: [MQTTPublish] = []
    /// Matches that cannot be delivered.
    public var deadLetters: [DeadLetter] = []
    /// Rules that took the event but whose `where` did not match (outcome `filtered`).
    public var filtered: [String] = []
    public init() {}
    /// Whether no rule matched at all.
    public var isUnmatched: Bool { publishes.isEmpty && deadLetters.isEmpty && filtered.isEmpty }
}
