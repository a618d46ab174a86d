/// MQTT quality of service.
public enum MQTTQoS: Int, Sendable, Hashable, Comparable {
    /// At most once: no acknowledgement, lost when the connection is down.
    case atMostOnce = 0
    /// At least once: PUBACK; may be duplicated.
    case atLeastOnce = 1
    /// Exactly once: PUBREC/PUBREL/PUBCOMP.
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}
