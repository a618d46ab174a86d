/// The MQTT protocol level spoken on the wire; the raw value is the protocol level byte of CONNECT
/// (and the `protocol` config key).
public enum MQTTProtocolVersion: Int, Sendable, Hashable {
    /// MQTT 3.1.1 (protocol level 4).
    case v311 = 4
    /// MQTT 5.0: properties, reason codes, subscription options, session expiry.
    case v5 = 5
}
