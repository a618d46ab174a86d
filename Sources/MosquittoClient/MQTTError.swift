/// An error a user of `MQTTClient` sees: what happened, in words, plus the codes behind it.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure; switch on it when the reaction differs.
    public enum Kind: Sendable, Hashable {
        /// The configuration cannot work (see `MQTTConfiguration.problems`).
        case invalidConfiguration
        /// An argument (topic, payload size, option) is not acceptable.
        case invalidArgument
        /// The feature needs MQTT 5 but the client speaks 3.1.1.
        case unsupported
        /// TCP connect, DNS or socket failure.
        case network
        /// TLS handshake or certificate failure (wrong CA, bad client cert, hostname mismatch).
        case tls
        /// The broker refused CONNECT (CONNACK code in `code`).
        case connectionRefused
        /// The connection was lost.
        case connectionLost
        /// A QoS 0 publish was attempted while not connected (it would be lost).
        case notConnected
        /// The broker answered a publish or subscribe with a failure reason code.
        case rejected
        /// `trySend` found the in-flight window full.
        case inFlightLimitReached
        /// The client was shut down before the operation completed.
        case shutdown
        /// Any other libmosquitto error.
        case library
    }

    /// The kind of failure.
    public var kind: Kind
    /// What went wrong, for a person.
    public var message: String
    /// The libmosquitto error, CONNACK or reason code, when there is one.
    public var code: Int?

    public init(kind: Kind, message: String, code: Int? = nil) {
        self.kind = kind
        self.message = message
        self.code = code
    }

    public var description: String {
        if let code { return "\(message) (code \(code))" }
        return message
    }

    static func invalidArgument(_ message: String) -> MQTTError { .init(kind: .invalidArgument, message: message) }
    static func unsupported(_ message: String) -> MQTTError { .init(kind: .unsupported, message: message) }
    static let notConnected = MQTTError(
        kind: .notConnected, message: "not connected: a QoS 0 publish would be lost")
    static let shutdown = MQTTError(kind: .shutdown, message: "the MQTT client was shut down")
    static func inFlightLimitReached(_ limit: Int) -> MQTTError {
        .init(kind: .inFlightLimitReached, message: "\(limit) publishes already in flight")
    }
}
