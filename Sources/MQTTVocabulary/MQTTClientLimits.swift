/// What the MQTT client refuses in its configuration, stated once. MosquittoClient's
/// `MQTTConfiguration.problems` (checked when a client is made, so when a bridge starts) and the
/// config loader (BridgeCore, `[bridge.mqtt]` and every configured topic) both call these, so
/// `check` refuses exactly what `run` would (docs/contract.md §4 `[bridge.mqtt]`).
///
/// The limits are libmosquitto 2.0's (docs/mqtt-notes.md): `mosquitto_connect*` takes a keep-alive
/// of 5…65535 s (`lib/connect.c`); `mosquitto_new`, `mosquitto_username_pw_set`,
/// `mosquitto_will_set*`, publishes and subscriptions refuse strings that break
/// `mosquitto_validate_utf8` (`lib/utf8_mosq.c`: NUL, control characters, noncharacters), and
/// MQTT strings are at most 65,535 bytes (MQTT §1.5.4).
///
/// Each `…Problem` function returns what is wrong as a phrase that follows the value's name
/// (`keepalive must be …`, `client_id: must be …`), or `nil` when the client accepts the value.
public enum MQTTClientLimits {
    /// The keep-alive interval libmosquitto accepts (0, "off", is not offered: a bridge needs one).
    public static let keepAlive: ClosedRange<Duration> = .seconds(5) ... .seconds(65535)
    /// The MQTT 5 Session Expiry Interval: a four-byte number of seconds.
    public static let sessionExpiry: ClosedRange<Duration> = .zero ... .seconds(Int64(UInt32.max))
    /// The longest MQTT string: client id, user name, topic.
    public static let maximumStringBytes = 65_535
    /// TCP ports.
    public static let ports: ClosedRange<Int> = 1...65535

    public static func keepAliveProblem(_ keepAlive: Duration) -> String? {
        Self.keepAlive.contains(keepAlive) ? nil : "must be between 5s and 65535s (the MQTT client's limits)"
    }

    public static func sessionExpiryProblem(_ expiry: Duration) -> String? {
        sessionExpiry.contains(expiry) ? nil : "must be between 0 and 4294967295s"
    }

    public static func portProblem(_ port: Int) -> String? {
        ports.contains(port) ? nil : "must be between 1 and 65535"
    }

    /// A client identifier, as `mosquitto_new` takes it.
    public static func clientIDProblem(_ clientID: String) -> String? {
        if clientID.isEmpty { return "must not be empty" }
        return stringProblem(clientID)
    }

    /// A user name, as `mosquitto_username_pw_set` takes it. (The password is binary data in MQTT:
    /// libmosquitto checks nothing in it.)
    public static func usernameProblem(_ username: String) -> String? {
        if username.isEmpty { return "must not be empty" }
        return stringProblem(username)
    }

    /// A topic to publish to (the Last Will's, a status or dead-letter topic), as
    /// `mosquitto_will_set` and `mosquitto_publish` take it: not empty, no wildcards.
    public static func topicNameProblem(_ topic: some StringProtocol) -> String? {
        if topic.isEmpty { return "must not be empty" }
        if topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) {
            return "must not contain a wildcard ('+' or '#')"
        }
        return stringProblem(topic)
    }

    /// Any MQTT string (client id, user name, topic name or filter): at most 65,535 bytes, and
    /// nothing `mosquitto_validate_utf8` refuses: U+0000, the control characters U+0001–U+001F
    /// and U+007F–U+009F, the noncharacters U+FDD0–U+FDEF and U+nFFFE/U+nFFFF.
    public static func stringProblem(_ text: some StringProtocol) -> String? {
        if text.utf8.count > maximumStringBytes { return "is longer than \(maximumStringBytes) bytes" }
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value == 0 { return "contains a NUL character, which MQTT strings cannot hold" }
            if value <= 0x1F || (0x7F...0x9F).contains(value) {
                return "contains the control character \(codePoint(value)), which the MQTT client (libmosquitto) refuses"
            }
            if (0xFDD0...0xFDEF).contains(value) || value & 0xFFFE == 0xFFFE {
                return "contains the noncharacter \(codePoint(value)), which the MQTT client (libmosquitto) refuses"
            }
        }
        return nil
    }

    /// `U+0009`: four hex digits at least.
    static func codePoint(_ value: UInt32) -> String {
        let hex = String(value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
