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

/// One MQTT 5 user property (a name/value pair; names may repeat).
public struct MQTTUserProperty: Sendable, Hashable {
    /// The property's name.
    public var name: String
    /// The property's value.
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

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

/// What a subscription asks of the broker.
public struct MQTTSubscription: Sendable, Hashable {
    /// MQTT 5 Retain Handling (subscription option bits 4–5).
    public enum RetainHandling: Sendable, Hashable {
        /// Send retained messages on every subscribe (the default).
        case sendAlways
        /// Send retained messages only when the subscription is new.
        case sendIfNew
        /// Never send retained messages for this subscription.
        case never
    }

    /// The topic filter (`+` and `#` allowed).
    public var filter: String
    /// The maximum QoS we accept.
    public var qos: MQTTQoS
    /// MQTT 5 No Local: the broker does not send us our own publishes (loop prevention, DESIGN §5.4).
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
    var usesV5Options: Bool { noLocal || retainAsPublished || retainHandling != .sendAlways }
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
