import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `[bridge.pusher]`: the Pusher app and how to reach it.
public struct PusherSettings: Sendable, Equatable {
    /// `key` (required).
    public var key: String
    /// `app_id`: required when a rule publishes through the HTTP API.
    public var appID: String?
    /// `secret` or `secret_file`: signs private/presence auth and HTTP API calls.
    public var secret: Secret?
    /// `cluster` (default `mt1` when no `host` is set).
    public var cluster: String?
    /// WebSocket host: `host`, else `ws-<cluster>.pusher.com`.
    public var host: String
    /// WebSocket port: `port`, else 443 with TLS, 80 without.
    public var port: Int
    /// `tls`, default true.
    public var useTLS: Bool
    /// HTTP API host: `rest_host`, else `host` when set, else `api-<cluster>.pusher.com`.
    public var restHost: String
    /// HTTP API port: `rest_port`, else `port`.
    public var restPort: Int
    /// `ca_file`: extra trust root (must exist).
    public var caFile: String?
    /// `auth_endpoint`: signs private/presence subscriptions instead of `secret`.
    public var authEndpoint: String?
    /// `auth_headers`, sent to the auth endpoint.
    public var authHeaders: [String: String]
    /// `activity_timeout`, default 120 s; the client uses min(this, the server's).
    public var activityTimeout: Duration
    /// `pong_timeout`, default 30 s.
    public var pongTimeout: Duration
    /// `encryption_master_key_base64` (or `_file`): 32 bytes, for `private-encrypted-` channels.
    public var encryptionMasterKey: Secret?
    /// `user_id`: the bridge's presence identity when signing with the secret; defaults to
    /// `pusher-mqtt-bridge-<bridge>` unless `auth_endpoint` is set (then the endpoint chooses it).
    public var userID: String?
    /// `user_info` as JSON text (an inline table in the config).
    public var userInfoJSON: String?
    /// `max_event_bytes`, default 10 KiB: larger event data is dead-lettered (docs/contract.md §5.2).
    public var maxEventBytes: Int
    /// `api_lanes`, default 8 (1…64): MQTT → Pusher requests in flight at once; a channel always uses one lane (docs/contract.md §5.2).
    public var apiLanes = 8
    /// `connections`, default 1 (1…3): independent connections, each holding every channel the
    /// bridge holds; their events are merged (docs/pusher-merge.md).
    public var connections = 1
    /// `drain_rate` (messages per second): the cap on how fast the MQTT → Pusher backlog leaves
    /// after an outage; nil: not paced (docs/contract.md §8.3).
    public var drainRate: Double?
    /// `sign_in`, default false: sign in as `user_id` on every connection (docs/contract.md §8.2).
    public var signIn = false
    /// `user_auth_endpoint`: signs the sign-in instead of `secret` (the endpoint chooses the user).
    public var userAuthEndpoint: String?
    /// `watchlist`: at most 100 user ids whose online/offline the bridge is told (needs `sign_in`).
    public var watchlist: [String] = []

    public init(
        key: String, appID: String? = nil, secret: Secret? = nil, cluster: String? = "mt1", host: String = "ws-mt1.pusher.com",
        port: Int = 443, useTLS: Bool = true, restHost: String = "api-mt1.pusher.com", restPort: Int = 443, caFile: String? = nil,
        authEndpoint: String? = nil, authHeaders: [String: String] = [:], activityTimeout: Duration = .seconds(120),
        pongTimeout: Duration = .seconds(30), encryptionMasterKey: Secret? = nil, userID: String? = nil,
        userInfoJSON: String? = nil, maxEventBytes: Int = 10 * 1024
    ) {
        self.key = key
        self.appID = appID
        self.secret = secret
        self.cluster = cluster
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.restHost = restHost
        self.restPort = restPort
        self.caFile = caFile
        self.authEndpoint = authEndpoint
        self.authHeaders = authHeaders
        self.activityTimeout = activityTimeout
        self.pongTimeout = pongTimeout
        self.encryptionMasterKey = encryptionMasterKey
        self.userID = userID
        self.userInfoJSON = userInfoJSON
        self.maxEventBytes = maxEventBytes
    }
}
