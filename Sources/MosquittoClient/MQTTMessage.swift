import MQTTVocabulary

/// The MQTT 5 PUBLISH properties this client reads and writes. All empty with MQTT 3.1.1.
public struct MQTTPublishProperties: Sendable, Hashable {
    /// User properties, in wire order.
    public var userProperties: [MQTTUserProperty]
    /// Content Type (e.g. `application/json`).
    public var contentType: String?
    /// Message Expiry Interval in seconds.
    public var messageExpiry: UInt32?
    /// Payload Format Indicator: 1 = UTF-8 text.
    public var payloadFormatIndicator: UInt8?
    /// Response Topic (request/response pattern).
    public var responseTopic: String?
    /// Correlation Data (request/response pattern).
    public var correlationData: [UInt8]?

    public init(
        userProperties: [MQTTUserProperty] = [],
        contentType: String? = nil,
        messageExpiry: UInt32? = nil,
        payloadFormatIndicator: UInt8? = nil,
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil
    ) {
        self.userProperties = userProperties
        self.contentType = contentType
        self.messageExpiry = messageExpiry
        self.payloadFormatIndicator = payloadFormatIndicator
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }

    /// Whether no property is set (the only thing MQTT 3.1.1 can carry).
    public var isEmpty: Bool {
        userProperties.isEmpty && contentType == nil && messageExpiry == nil
            && payloadFormatIndicator == nil && responseTopic == nil && correlationData == nil
    }
}

/// A message received from the broker, copied out of libmosquitto's callback.
public struct MQTTMessage: Sendable, Hashable {
    /// The topic it was published to.
    public var topic: String
    /// The payload bytes (zero-length for a retained-message deletion).
    public var payload: [UInt8]
    /// The QoS it was delivered with.
    public var qos: MQTTQoS
    /// Whether it came from the broker's retained store (or, with retain-as-published, was published retained).
    public var retain: Bool
    /// MQTT 5 properties (empty with 3.1.1).
    public var properties: MQTTPublishProperties

    public init(
        topic: String,
        payload: [UInt8],
        qos: MQTTQoS = .atMostOnce,
        retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }
}

/// Identifies one accepted publish across reconnects (libmosquitto's 16-bit message ids are
/// reused; this one is not).
public struct MQTTPublishID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Monotonic per client, starting at 1.
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static func < (lhs: MQTTPublishID, rhs: MQTTPublishID) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "#\(rawValue)" }
}

/// The outcome of a publish made with `MQTTClient.send(...)`: delivered on `MQTTClient.completions`.
public struct MQTTPublishCompletion: Sendable {
    /// Which publish completed.
    public var id: MQTTPublishID
    /// Its QoS (QoS 0 completes when written to the socket, QoS 1 on PUBACK, QoS 2 on PUBCOMP).
    public var qos: MQTTQoS
    /// `nil` on success, else why the broker refused it or why it was given up.
    public var error: MQTTError?

    public init(id: MQTTPublishID, qos: MQTTQoS, error: MQTTError?) {
        self.id = id
        self.qos = qos
        self.error = error
    }
}

/// The connection as observers see it (`MQTTClient.states`).
public enum MQTTConnectionState: Sendable, Equatable {
    /// Created, `start()` not called yet.
    case idle
    /// Attempt `attempt` (0-based since the last stable connection) is under way.
    case connecting(attempt: Int)
    /// CONNACK accepted. `sessionPresent` false means the broker has no state for us: the client
    /// resubscribes everything it knows by itself.
    case connected(sessionPresent: Bool)
    /// Not connected; the next attempt starts after `retryIn`. `error` says why.
    case disconnected(error: MQTTError, retryIn: Duration)
    /// Shut down (or gave up after `ReconnectPolicy.maxAttempts`, then `error` is set).
    case stopped(error: MQTTError?)
}
