/// One Pusher app served by pusher-local: id (HTTP API paths), key (WebSocket path, auth
/// strings) and secret (signatures). The secret is never logged.
public struct PusherLocalApp: Sendable, Hashable, CustomStringConvertible {
    public var id: String
    public var key: String
    public var secret: String

    public init(id: String, key: String, secret: String) {
        self.id = id
        self.key = key
        self.secret = secret
    }

    /// The demo app: id `1`, key `app-key`, secret `app-secret`.
    public static let demo = PusherLocalApp(id: "1", key: "app-key", secret: "app-secret")

    /// `ID/KEY` (no secret), as the ready line and logs show it.
    public var description: String { id + "/" + key }

    /// Parses `ID:KEY:SECRET` (the `--app` flag); the secret may itself contain `:`.
    public init?(spec: String) {
        let parts = spec.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else { return nil }
        self.init(id: String(parts[0]), key: String(parts[1]), secret: String(parts[2]))
    }
}

/// Everything pusher-local needs to run. Plain values with defaults suited to development.
public struct PusherLocalConfiguration: Sendable {
    /// Address to bind; default `127.0.0.1`.
    public var host: String
    /// Port to bind; `0` picks a free port (read it from ``RunningPusherLocal/port``).
    public var port: Int
    /// The apps served (at least one; ids and keys unique).
    public var apps: [PusherLocalApp]
    /// `activity_timeout` announced to clients, and the silence after which the server pings a
    /// client (docs/pusher-protocol.md §1; hosted Pusher: 120 s).
    public var activityTimeout: Duration
    /// How long a pinged client may stay silent before the server closes it with 4201.
    public var pongTimeout: Duration
    /// Whether the `/pusher-local/...` test and fault control endpoints are served.
    public var controlEnabled: Bool
    /// Webhook target URL (`http://…`), or `nil` for no webhooks.
    public var webhookURL: String?
    /// How webhooks are batched and retried.
    public var webhooks: WebhookSettings
    /// Whether every app announces subscription counts of non-presence channels
    /// (`pusher_internal:subscription_count` to subscribers, `subscription_count` webhooks);
    /// hosted Pusher has this as a per-app setting, off by default.
    public var subscriptionCountEvents: Bool
    /// The user-level settings of every app (watchlist events, sign-in timeout), unless
    /// ``usersPerApp`` names the app.
    public var users: PusherLocalUserSettings
    /// User-level settings of single apps, by app id; they replace ``users`` for that app.
    public var usersPerApp: [String: PusherLocalUserSettings]
    /// Largest WebSocket frame accepted or sent. Pusher allows 10 KB of data, which can grow to
    /// ~60 KB after JSON escaping; swift-websocket's default of 16 KiB would close silently.
    public var maxFrameSize: Int
    /// Largest HTTP request body accepted (413 beyond).
    public var maxBodySize: Int
    /// Frames that may wait for one slow connection before it is disconnected.
    public var maxQueuedFrames: Int
    /// The certificate and key to serve `https://` and `wss://` with; `nil` serves plain
    /// `http://` and `ws://`.
    public var tls: PusherLocalTLS?

    public init(
        host: String = "127.0.0.1",
        port: Int = 6001,
        apps: [PusherLocalApp] = [.demo],
        activityTimeout: Duration = .seconds(120),
        pongTimeout: Duration = .seconds(30),
        controlEnabled: Bool = true,
        webhookURL: String? = nil,
        webhooks: WebhookSettings = WebhookSettings(),
        subscriptionCountEvents: Bool = false,
        users: PusherLocalUserSettings = PusherLocalUserSettings(),
        usersPerApp: [String: PusherLocalUserSettings] = [:],
        maxFrameSize: Int = 256 * 1024,
        maxBodySize: Int = 1024 * 1024,
        maxQueuedFrames: Int = 1_000_000,
        tls: PusherLocalTLS? = nil
    ) {
        self.host = host
        self.port = port
        self.apps = apps
        self.activityTimeout = activityTimeout
        self.pongTimeout = pongTimeout
        self.controlEnabled = controlEnabled
        self.webhookURL = webhookURL
        self.webhooks = webhooks
        self.subscriptionCountEvents = subscriptionCountEvents
        self.users = users
        self.usersPerApp = usersPerApp
        self.maxFrameSize = maxFrameSize
        self.maxBodySize = maxBodySize
        self.maxQueuedFrames = maxQueuedFrames
        self.tls = tls
    }

    /// Problems that make this configuration unusable, one message each (empty when valid).
    public var problems: [String] {
        var problems: [String] = []
        if apps.isEmpty { problems.append("at least one app is needed") }
        if Set(apps.map(\.id)).count != apps.count { problems.append("app ids must be unique") }
        if Set(apps.map(\.key)).count != apps.count { problems.append("app keys must be unique") }
        for app in apps where app.id.isEmpty || app.key.isEmpty || app.secret.isEmpty {
            problems.append("app \(app): id, key and secret must not be empty")
        }
        if !(0...65535).contains(port) { problems.append("port \(port) is not in 0...65535") }
        if activityTimeout < .seconds(1) { problems.append("activity timeout must be at least 1 second") }
        if pongTimeout <= .zero { problems.append("pong timeout must be positive") }
        if maxQueuedFrames < 1 { problems.append("max queued frames must be at least 1") }
        if let webhookURL, !(webhookURL.hasPrefix("http://") || webhookURL.hasPrefix("https://")) {
            problems.append("webhook URL must start with http:// or https://")
        }
        problems += webhooks.problems
        problems += users.problems
        for (appID, settings) in usersPerApp.sorted(by: { $0.key < $1.key }) {
            if !apps.contains(where: { $0.id == appID }) { problems.append("user settings name app id \(appID), which is not served") }
            problems += settings.problems.map { "app \(appID): \($0)" }
        }
        return problems
    }

    /// The user-level settings of app `appID`.
    public func userSettings(appID: String) -> PusherLocalUserSettings {
        usersPerApp[appID] ?? users
    }
}
