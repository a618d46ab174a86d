import Backoff
import PusherProtocol

/// Everything a ``PusherClient`` needs to know, with PusherSwift's reach and defaults.
public struct PusherClientOptions: Sendable {
    /// Where the WebSocket server is.
    public enum Host: Sendable, Hashable {
        /// Hosted Pusher: `ws-CLUSTER.pusher.com` (docs/pusher-protocol.md §1), port 443 (TLS) or 80.
        case cluster(String)
        /// A custom server (pusher-local, soketi, …); `port` defaults to 443/80 by TLS.
        case host(String, port: Int? = nil)
    }

    /// The app key.
    public var key: String
    /// The server.
    public var host: Host
    /// Use TLS (`wss`); on by default, like PusherSwift's `useTLS`/`encrypted`.
    public var encrypted: Bool
    /// A PEM file with CA certificate(s) to trust instead of the system roots.
    public var caFile: String?
    /// The TLS server name (SNI and certificate check) when it differs from the host, e.g. when
    /// connecting to an IP address (TLS forbids IP addresses in SNI).
    public var tlsServerName: String?
    /// Send `pusher:ping` after this much silence; the client uses min(this, the server's
    /// `activity_timeout`) (docs/pusher-protocol.md §1 "Keep-alive").
    public var activityTimeout: Duration
    /// Without a `pusher:pong` this long after our ping, drop the connection and reconnect.
    public var pongTimeout: Duration
    /// Without `pusher:connection_established` this long after the TCP connect, retry.
    public var handshakeTimeout: Duration
    /// Reconnect after losing the connection (PusherSwift `autoReconnect`).
    public var autoReconnect: Bool
    /// Delays between attempts, the cap (`maxReconnectGapInSeconds`) and the attempt limit
    /// (`reconnectAttemptsMax`, default unlimited).
    public var reconnectPolicy: ReconnectPolicy
    /// After a 4000–4099 close (configuration refused) keep retrying at the backoff cap (`true`,
    /// what a daemon wants: the operator may fix the app meanwhile) or stop (`false`, PusherSwift).
    public var retryAfterRefusal: Bool
    /// How private, presence and encrypted channels are authorized.
    public var authorization: PusherAuthorization
    /// How the client signs in as a user (``PusherClient/signIn()``); `.none` by default.
    public var userAuthentication: PusherUserAuthentication
    /// Largest WebSocket frame accepted. swift-websocket's 16 KiB default silently closes on
    /// bigger frames; a 10 KB event grows when JSON-escaped, so the default is 256 KiB.
    public var maxFrameSize: Int
    /// `client=` in the URL.
    public var clientName: String
    /// `version=` in the URL.
    public var clientVersion: String

    /// Options with PusherSwift's defaults: TLS, cluster `mt1`, activity 120 s, pong 30 s.
    public init(
        key: String,
        host: Host = .cluster("mt1"),
        encrypted: Bool = true,
        caFile: String? = nil,
        tlsServerName: String? = nil,
        activityTimeout: Duration = .seconds(120),
        pongTimeout: Duration = .seconds(30),
        handshakeTimeout: Duration = .seconds(30),
        autoReconnect: Bool = true,
        reconnectPolicy: ReconnectPolicy = .default,
        retryAfterRefusal: Bool = true,
        authorization: PusherAuthorization = .none,
        userAuthentication: PusherUserAuthentication = .none,
        maxFrameSize: Int = 256 * 1024,
        clientName: String = "pusher-mqtt-bridge",
        clientVersion: String = "0.1.0"
    ) {
        self.key = key
        self.host = host
        self.encrypted = encrypted
        self.caFile = caFile
        self.tlsServerName = tlsServerName
        self.activityTimeout = activityTimeout
        self.pongTimeout = pongTimeout
        self.handshakeTimeout = handshakeTimeout
        self.autoReconnect = autoReconnect
        self.reconnectPolicy = reconnectPolicy
        self.retryAfterRefusal = retryAfterRefusal
        self.authorization = authorization
        self.userAuthentication = userAuthentication
        self.maxFrameSize = maxFrameSize
        self.clientName = clientName
        self.clientVersion = clientVersion
    }

    /// The host name to connect to.
    public var hostName: String {
        switch host {
        case .cluster(let cluster): "ws-\(cluster).pusher.com"
        case .host(let name, _): name
        }
    }

    /// The port to connect to.
    public var port: Int {
        switch host {
        case .cluster: encrypted ? 443 : 80
        case .host(_, let port): port ?? (encrypted ? 443 : 80)
        }
    }

    /// `ws[s]://HOST:PORT/app/KEY?protocol=7&client=NAME&version=V` (docs/contract.md §5.5).
    public var url: String {
        let scheme = encrypted ? "wss" : "ws"
        let key = PusherAuthRequest.formEncode(self.key)
        return "\(scheme)://\(hostName):\(port)/app/\(key)?protocol=7&client=\(clientName)&version=\(clientVersion)"
    }

    /// Problems that make these options unusable, as sentences; empty when valid. The limits of
    /// values that come from `bridges.conf` are `PusherClientLimits`', which the config loader
    /// checks too: `check` refuses what the bridge's start refuses.
    public var problems: [String] {
        var found = reconnectPolicy.problems
        func add(_ name: String, _ problem: String?) {
            if let problem { found.append("\(name) \(problem)") }
        }
        if key.isEmpty { found.append("key must not be empty") }
        add("activity_timeout", PusherClientLimits.activityTimeoutProblem(activityTimeout))
        add("pong_timeout", PusherClientLimits.pongTimeoutProblem(pongTimeout))
        if maxFrameSize < 16 * 1024 { found.append("max frame size must be at least 16 KiB") }
        if case .host(let name, let port) = host {
            if name.isEmpty { found.append("host must not be empty") }
            if let port { add("port", PusherClientLimits.portProblem(port)) }
        }
        return found
    }
}
