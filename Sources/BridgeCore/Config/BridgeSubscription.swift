import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// What the daemon subscribes to on the broker, and which rules or mirrors need it.
///
/// `subscription` says what the configuration asks for; `BridgeStateMachine` fits No Local and
/// Retain Handling to the protocol version before it goes to the broker. With MQTT 3.1.1 a
/// Retain Handling of `.never` cannot be sent: the rule table drops messages with the retain flag
/// set instead.
public struct BridgeSubscription: Sendable, Equatable {
    /// The filter and its options.
    public var subscription: MQTTSubscription
    /// Which rules or mirrors need this subscription (for logs and `check`).
    public var purposes: [String]

    public init(_ subscription: MQTTSubscription, purposes: [String] = []) {
        self.subscription = subscription
        self.purposes = purposes
    }

    /// The topic filter.
    public var filter: String { subscription.filter }
}
