import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `[bridge.mqtt]`: the broker and the session.
public struct MQTTSettings: Sendable, Equatable {
    /// `host`, default `localhost`.
    public var host: String
    /// `port`, default 1883 (8883 with TLS).
    public var port: Int
    /// `hosts` after the first (which is `host`/`port`): further nodes of the broker's cluster,
    /// tried in turn when one does not answer or a connection is lost.
    public var failover: [MQTTBrokerAddress] = []
    /// `tls`, default false.
    public var useTLS: Bool
    /// `ca_file` (must exist).
    public var caFile: String?
    /// `cert_file` (must exist; needs `key_file`).
    public var certFile: String?
    /// `key_file` (must exist; needs `cert_file`).
    public var keyFile: String?
    /// `tls_insecure`, default false: skip host name verification.
    public var tlsInsecure: Bool
    /// `client_id`, default `pusher-mqtt-bridge-<bridge>`; unique across bridges.
    public var clientID: String
    /// `username`.
    public var username: String?
    /// `password` or `password_file`.
    public var password: Secret?
    /// `protocol`, default 5.
    public var protocolVersion: MQTTProtocolVersion
    /// `clean_session`, default false (persistent session).
    public var cleanSession: Bool
    /// `keepalive`, default 30 s.
    public var keepalive: Duration
    /// `session_expiry`, default 1 h: the MQTT 5 Session Expiry Interval sent on CONNECT. MQTT 5
    /// has no persistent session without it (docs/mqtt-notes.md §4); ignored with protocol 4.
    public var sessionExpiry: Duration
    /// `status_topic`, default `pusher-mqtt-bridge/<bridge>/status`.
    public var statusTopic: String
    /// `dead_letter_topic`: where undeliverable messages go; `nil` = only count and log.
    public var deadLetterTopic: String?
    /// `drain_rate` (messages per second): the cap on how fast the Pusher → MQTT backlog leaves
    /// after the broker was away; nil: not paced (docs/contract.md §8.3).
    public var drainRate: Double?

    public init(
        host: String = "localhost", port: Int = 1883, useTLS: Bool = false, caFile: String? = nil, certFile: String? = nil,
        keyFile: String? = nil, tlsInsecure: Bool = false, clientID: String, username: String? = nil, password: Secret? = nil,
        protocolVersion: MQTTProtocolVersion = .v5, cleanSession: Bool = false, keepalive: Duration = .seconds(30),
        sessionExpiry: Duration = .seconds(3600), statusTopic: String, deadLetterTopic: String? = nil
    ) {
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.tlsInsecure = tlsInsecure
        self.clientID = clientID
        self.username = username
        self.password = password
        self.protocolVersion = protocolVersion
        self.cleanSession = cleanSession
        self.keepalive = keepalive
        self.sessionExpiry = sessionExpiry
        self.statusTopic = statusTopic
        self.deadLetterTopic = deadLetterTopic
    }
}
