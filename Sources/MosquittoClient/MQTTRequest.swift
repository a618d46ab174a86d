import MQTTVocabulary

/// A SUBSCRIBE or UNSUBSCRIBE.
enum MQTTRequest: Sendable, Hashable {
    /// SUBSCRIBE with these options.
    case subscribe(MQTTSubscription)
    /// UNSUBSCRIBE this filter.
    case unsubscribe(String)
}
