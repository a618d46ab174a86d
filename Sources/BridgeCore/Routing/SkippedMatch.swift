import BridgeVocabulary
import MQTTVocabulary

/// A rule that matched but deliberately did not forward (not an error, not dead-lettered).
public struct SkippedMatch: Sendable, Equatable {
    public var rule: String
    /// Why, in words (e.g. retained messages are not forwarded).
    public var reason: String
    public init(rule: String, reason: String) {
        self.rule = rule
        self.reason = reason
    }
}
