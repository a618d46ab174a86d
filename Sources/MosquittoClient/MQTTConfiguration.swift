import Backoff
import MQTTVocabulary

/// Where a client looks for certificates when it talks TLS to the broker.
public struct MQTTTLSConfiguration: Sendable, Hashable {
    /// A PEM file of trusted CA certificates. When both this and `caDirectory` are `nil`,
    /// the operating system's trust store is used (`MOSQ_OPT_TLS_USE_OS_CERTS`).
    public var caFile: String?
    /// A directory of hashed PEM CA certificates (`c_rehash` layout).
    public var caDirectory: String?
    /// The client certificate (PEM) for mutual TLS; needs `keyFile`.
    public var certificateFile: String?
    /// The client's private key (PEM, unencrypted) for mutual TLS; needs `certificateFile`.
    public var keyFile: String?
    /// Skip the check that the broker's certificate names `host`. Only for tests and broken
    /// deployments: it makes a man-in-the-middle trivial (docs/mqtt-notes.md §11). Default `false`.
    public var insecure: Bool

    public init(
        caFile: String? = nil,
        caDirectory: String? = nil,
        certificateFile: String? = nil,
        keyFile: String? = nil,
        insecure: Bool = false
    ) {
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.insecure = insecure
    }
}

/// The Last Will: what the broker publishes for us when our connection dies without a DISCONNECT
/// (docs/contract.md §5.5: `offline` on the status topic).
public struct MQTTWill: Sendable, Hashable {
    /// The topic the broker publishes the will to.
    public var topic: String
    /// The will's payload.
    public var payload: [UInt8]
    /// The will's QoS.
    public var qos: MQTTQoS
    /// Whether the broker retains the will.
    public var retain: Bool
    /// MQTT 5 user properties the broker delivers with the will (ignored with MQTT 3.1.1).
    public var userProperties: [MQTTUserProperty]

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true, userProperties: [MQTTUserProperty] = []
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.userProperties = userProperties
    }
}

/// What the client does when incoming messages arrive faster than its consumer takes them.
public enum MQTTIncomingOverflow: Sendable, Hashable {
    /// Block the network thread up to `backpressureTimeout` for room, then drop, count and log.
    case dropAfterTimeout
    /// Never drop: stop reading from the broker while the buffer is above `messageBufferSize`
    /// messages or `messageBufferBytes` bytes, go on below half of both; a lost connection is
    /// opened again only then (the persistent session holds the rest; docs/contract.md §7.6).
    case pauseReading
}

/// Everything an `MQTTClient` needs to know, with the defaults a bridge wants.
///
/// | field | default | note |
/// |---|---|---|
/// | `host`, `port` | — , 1883 | |
/// | `failover` | none | more nodes of the broker's cluster: tried in turn after `host:port` (`brokers`) |
/// | `clientID` | — | must be unique per broker: two clients with one id kick each other off |
/// | `protocolVersion` | `.v5` | |
/// | `cleanSession` | `false` | persistent session: the broker queues QoS ≥ 1 for us while we are away |
/// | `sessionExpiry` | 1 hour | MQTT 5 only, sent on every CONNECT when `cleanSession` is false (docs/mqtt-notes.md §4) |
/// | `keepAlive` | 30 s | 5…65535 s (libmosquitto's limits, `MQTTClientLimits.keepAlive`) |
/// | `username`, `password` | `nil` | never logged |
/// | `tls` | `nil` (plain TCP) | |
/// | `will` | `nil` | |
/// | `reconnect` | `ReconnectPolicy.default` | our own backoff (docs/contract.md §5.5), not libmosquitto's quadratic one |
/// | `maxInFlight` | 1000 | publishes accepted but not yet completed (≤ 65535) |
/// | `messageBufferSize` | 10 000 | incoming messages waiting for the consumer |
/// | `messageBufferBytes` | 16 MiB | with `.pauseReading`, the payload bytes at which reading pauses |
/// | `incomingOverflow` | `.dropAfterTimeout` | a full buffer: block then drop, or pause reading |
/// | `backpressureTimeout` | 5 s | how long the network thread waits for room before dropping (see `MQTTClient.messages`) |
/// | `shutdownDrainTimeout` | 2 s | how long `shutdown()` waits for outstanding acknowledgements |
public struct MQTTConfiguration: Sendable {
    /// Broker host name or address.
    public var host: String
    /// Broker TCP port.
    public var port: Int
    /// Further addresses of the same broker (a cluster's nodes), tried in turn after `host:port`:
    /// every failed attempt and every lost connection goes on to the next, with the usual backoff.
    public var failover: [MQTTBrokerAddress]
    /// The MQTT client identifier.
    public var clientID: String
    /// MQTT 3.1.1 or 5.
    public var protocolVersion: MQTTProtocolVersion
    /// `true`: the broker forgets us on disconnect. `false`: a persistent session.
    public var cleanSession: Bool
    /// MQTT 5 Session Expiry Interval sent with `cleanSession == false`.
    public var sessionExpiry: Duration
    /// Keep-alive interval (PINGREQ when idle).
    public var keepAlive: Duration
    /// Optional user name.
    public var username: String?
    /// Optional password (secret: never logged or printed).
    public var password: String?
    /// TLS settings; `nil` for plain TCP.
    public var tls: MQTTTLSConfiguration?
    /// Optional Last Will.
    public var will: MQTTWill?
    /// Reconnect backoff, shared with the Pusher side.
    public var reconnect: ReconnectPolicy
    /// Upper bound of publishes accepted and not yet acknowledged (QoS ≥ 1) or written (QoS 0).
    public var maxInFlight: Int
    /// Capacity of the incoming message buffer.
    public var messageBufferSize: Int
    /// With `.pauseReading`: the buffered payload bytes at which reading pauses.
    public var messageBufferBytes: Int
    /// What a full incoming buffer does: block then drop, or pause reading.
    public var incomingOverflow: MQTTIncomingOverflow
    /// How long the network thread blocks for room in a full message buffer before it drops.
    public var backpressureTimeout: Duration
    /// How long `shutdown()` waits for outstanding acknowledgements before disconnecting.
    public var shutdownDrainTimeout: Duration

    public init(
        host: String,
        port: Int = 1883,
        failover: [MQTTBrokerAddress] = [],
        clientID: String,
        protocolVersion: MQTTProtocolVersion = .v5,
        cleanSession: Bool = false,
        sessionExpiry: Duration = .seconds(3600),
        keepAlive: Duration = .seconds(30),
        username: String? = nil,
        password: String? = nil,
        tls: MQTTTLSConfiguration? = nil,
        will: MQTTWill? = nil,
        reconnect: ReconnectPolicy = .default,
        maxInFlight: Int = 1000,
        messageBufferSize: Int = 10_000,
        messageBufferBytes: Int = 16 * 1024 * 1024,
        incomingOverflow: MQTTIncomingOverflow = .dropAfterTimeout,
        backpressureTimeout: Duration = .seconds(5),
        shutdownDrainTimeout: Duration = .seconds(2)
    ) {
        self.host = host
        self.port = port
        self.failover = failover
        self.clientID = clientID
        self.protocolVersion = protocolVersion
        self.cleanSession = cleanSession
        self.sessionExpiry = sessionExpiry
        self.keepAlive = keepAlive
        self.username = username
        self.password = password
        self.tls = tls
        self.will = will
        self.reconnect = reconnect
        self.maxInFlight = maxInFlight
        self.messageBufferSize = messageBufferSize
        self.messageBufferBytes = messageBufferBytes
        self.incomingOverflow = incomingOverflow
        self.backpressureTimeout = backpressureTimeout
        self.shutdownDrainTimeout = shutdownDrainTimeout
    }

    /// Every address, `host:port` first, then `failover`.
    public var brokers: [MQTTBrokerAddress] { [MQTTBrokerAddress(host: host, port: port)] + failover }

    /// Problems that make this configuration unusable, as sentences; empty when valid. The limits
    /// of values that come from `bridges.conf` are `MQTTClientLimits`', which the config loader
    /// checks too: `check` refuses what this refuses.
    public var problems: [String] {
        var found: [String] = []
        func add(_ name: String, _ problem: String?) {
            if let problem { found.append("\(name) \(problem)") }
        }
        if host.isEmpty { found.append("host must not be empty") }
        add("port", MQTTClientLimits.portProblem(port))
        for node in failover {
            if node.host.isEmpty { found.append("a failover host must not be empty") }
            add("failover port", MQTTClientLimits.portProblem(node.port))
        }
        add("client_id", MQTTClientLimits.clientIDProblem(clientID))
        add("keepalive", MQTTClientLimits.keepAliveProblem(keepAlive))
        add("session_expiry", MQTTClientLimits.sessionExpiryProblem(sessionExpiry))
        if let username { add("username", MQTTClientLimits.usernameProblem(username)) }
        if !(1...65535).contains(maxInFlight) { found.append("max_in_flight must be between 1 and 65535") }
        if messageBufferSize < 1 { found.append("message_buffer_size must be at least 1") }
        if messageBufferBytes < 1 { found.append("message_buffer_bytes must be at least 1") }
        if backpressureTimeout < .zero { found.append("backpressure_timeout must not be negative") }
        if password != nil && username == nil { found.append("password needs a username") }
        if let tls {
            if (tls.certificateFile == nil) != (tls.keyFile == nil) {
                found.append("tls: cert_file and key_file must be given together")
            }
        }
        if let will { add("will topic", MQTTClientLimits.topicNameProblem(will.topic)) }
        found.append(contentsOf: reconnect.problems.map { "reconnect: \($0)" })
        return found
    }
}
