/// What a subscription asks of the broker.
public struct MQTTSubscription: Sendable, Hashable {
    /// MQTT 5 Retain Handling (subscription option bits 4–5).
    public enum RetainHandling: Sendable, Hashable {
        /// 0: send retained messages on every subscribe (the default).
        case sendAlways
        /// 1: send retained messages only when the subscription is new.
        case sendIfNew
        /// 2: never send retained messages for this subscription.
        case never
    }

    /// The topic filter (`+` and `#` allowed).
    public var filter: String
    /// The maximum QoS we accept.
    public var qos: MQTTQoS
    /// MQTT 5 No Local: the broker does not send us our own publishes (loop prevention, docs/contract.md §5.4).
    public var noLocal: Bool
    /// MQTT 5 Retain As Published: keep the publisher's retain flag.
    public var retainAsPublished: Bool
    /// MQTT 5 Retain Handling.
    public var retainHandling: RetainHandling

    public init(
        _ filter: String,
        qos: MQTTQoS = .atLeastOnce,
        noLocal: Bool = false,
        retainAsPublished: Bool = false,
        retainHandling: RetainHandling = .sendAlways
    ) {
        self.filter = filter
        self.qos = qos
        self.noLocal = noLocal
        self.retainAsPublished = retainAsPublished
        self.retainHandling = retainHandling
    }

    /// Whether any MQTT 5-only option is set.
    public var usesV5Options: Bool { noLocal || retainAsPublished || retainHandling != .sendAlways }
}
