import ArgumentParser
import Logging
import PusherLocal
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `pusher-local`: a Pusher-compatible server for development and tests (docs/contract.md §6).
struct PusherLocalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pusher-local",
        abstract: "A local Pusher-compatible server (WebSocket protocol 7 + HTTP API) for development and tests.",
        discussion: """
            WebSocket: ws://HOST:PORT/app/KEY?protocol=7   HTTP API: http://HOST:PORT/apps/ID/...
            Without --app/--app-id the demo app is served: id 1, key app-key, secret app-secret.
            Test/fault control endpoints (development only, unauthenticated) live under
            /pusher-local/... on the same port; --no-control turns them off.
            With --tls-cert and --tls-key (PEM files) the same port serves wss:// and https://.
            Prints one line "pusher-local listening on HOST:PORT (apps: ID/KEY ...)" to stdout when
            ready ("... HOST:PORT with TLS (apps: ...)" with TLS); logs go to stderr.
            SIGTERM/SIGINT stop it cleanly (exit 0).
            """
    )

    @Option(help: "Address to bind.")
    var host = "127.0.0.1"

    @Option(help: "Port to bind; 0 picks a free port (the ready line shows it).")
    var port = 6001

    @Option(name: .customLong("app-id"), help: "App id (with --key and --secret). Default: 1.")
    var appID: String?

    @Option(help: "App key. Default: app-key.")
    var key: String?

    @Option(help: "App secret. Default: app-secret.")
    var secret: String?

    @Option(name: .customLong("app"), help: "Another app as ID:KEY:SECRET (repeatable).")
    var apps: [String] = []

    @Option(
        name: .customLong("activity-timeout"),
        help: "activity_timeout announced to clients, in seconds; silent clients are pinged after it.")
    var activityTimeout = 120

    @Option(name: .customLong("pong-timeout"), help: "Seconds a pinged client may stay silent before it is closed with 4201.")
    var pongTimeout = 30

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(help: "POST webhooks (signed with X-Pusher-Signature) to this http:// URL.")
    var webhook: String?

    @Option(name: .customLong("webhook-batch-size"), help: "Most events in one webhook request (1...1000).")
    var webhookBatchSize = 20

    @Option(
        name: .customLong("webhook-batch-ms"), help: "Longest wait, in ms, for more events before a webhook request goes out (0...60000).")
    var webhookBatchMillis = 250

    @Option(
        name: .customLong("webhook-retry-initial-ms"), help: "Wait, in ms, before retrying a failed webhook request; doubled per failure.")
    var webhookRetryInitialMillis = 1000

    @Option(name: .customLong("webhook-retry-cap-ms"), help: "Longest wait, in ms, between two attempts of a webhook request.")
    var webhookRetryCapMillis = 60000

    @Option(
        name: .customLong("webhook-retry-max"),
        help: "Seconds after its first attempt during which a failed webhook request is retried (decimals allowed; 0: never).")
    var webhookRetryMax = "300"

    @Flag(
        name: .customLong("subscription-count"),
        help: "Announce subscription counts of non-presence channels (pusher_internal:subscription_count, subscription_count webhooks).")
    var subscriptionCount = false

    @Flag(
        name: .customLong("watchlist-events"),
        help: "Send signed-in users' watchlists pusher_internal:watchlist_events (online/offline), for every app.")
    var watchlistEvents = false

    @Flag(
        name: .customLong("require-signin"),
        help: "Close connections that do not pusher:signin within --signin-timeout with 4009, for every app.")
    var requireSignin = false

    @Option(
        name: .customLong("signin-timeout"),
        help: "Seconds a connection has to sign in with --require-signin (decimals allowed, > 0 and <= 86400; default 30).")
    var signinTimeout: String?

    @Option(name: .customLong("tls-cert"), help: "Serve wss:// and https:// with this PEM certificate chain (with --tls-key).")
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "The PEM private key of --tls-cert.")
    var tlsKey: String?

    @Flag(name: .customLong("no-control"), help: "Do not serve the /pusher-local/... control endpoints.")
    var noControl = false

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level '\(logLevel)'") }
        for spec in apps where PusherLocalApp(spec: spec) == nil {
            throw ValidationError("--app needs ID:KEY:SECRET, got '\(spec)'")
        }
        if appID != nil || key != nil || secret != nil, appID == nil || key == nil || secret == nil {
            throw ValidationError("--app-id, --key and --secret go together")
        }
        if activityTimeout < 1 { throw ValidationError("--activity-timeout must be at least 1") }
        if pongTimeout < 1 { throw ValidationError("--pong-timeout must be at least 1") }
        if (tlsCertificate == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if !(1...1000).contains(webhookBatchSize) {
            throw ValidationError("--webhook-batch-size must be 1...1000, got \(webhookBatchSize)")
        }
        if !(0...60000).contains(webhookBatchMillis) {
            throw ValidationError("--webhook-batch-ms must be 0...60000, got \(webhookBatchMillis)")
        }
        if webhookRetryInitialMillis < 1 {
            throw ValidationError("--webhook-retry-initial-ms must be at least 1, got \(webhookRetryInitialMillis)")
        }
        if webhookRetryCapMillis < webhookRetryInitialMillis {
            throw ValidationError(
                "--webhook-retry-cap-ms must be at least --webhook-retry-initial-ms (\(webhookRetryInitialMillis)), "
                    + "got \(webhookRetryCapMillis)"
            )
        }
        if let signinTimeout {
            guard let duration = Self.seconds(signinTimeout), duration > .zero else {
                throw ValidationError("--signin-timeout must be a number of seconds > 0 and <= 86400, got '\(signinTimeout)'")
            }
            if !requireSignin { throw ValidationError("--signin-timeout needs --require-signin") }
        }
        guard Self.seconds(webhookRetryMax) != nil else {
            throw ValidationError("--webhook-retry-max must be a number of seconds 0...86400, got '\(webhookRetryMax)'")
        }
    }

    /// `text` as a duration in seconds (decimals allowed), 0...86400; nil otherwise.
    static func seconds(_ text: String) -> Duration? {
        guard let value = Double(text), value.isFinite, (0...86400).contains(value) else { return nil }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    /// The webhook settings the flags give.
    var webhookSettings: WebhookSettings {
        WebhookSettings(
            batchSize: webhookBatchSize,
            batchDelay: .milliseconds(webhookBatchMillis),
            retryInitial: .milliseconds(webhookRetryInitialMillis),
            retryCap: .milliseconds(webhookRetryCapMillis),
            retryLimit: Self.seconds(webhookRetryMax) ?? .seconds(300)
        )
    }

    /// The user-level settings the flags give (every app).
    var userSettings: PusherLocalUserSettings {
        PusherLocalUserSettings(
            watchlistEvents: watchlistEvents,
            signinTimeout: requireSignin ? signinTimeout.flatMap(Self.seconds) ?? PusherLocalUserSettings.defaultSigninTimeout : nil)
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "pusher-local")
        var appList: [PusherLocalApp] = []
        if let appID, let key, let secret { appList.append(PusherLocalApp(id: appID, key: key, secret: secret)) }
        appList += apps.compactMap(PusherLocalApp.init(spec:))
        if appList.isEmpty { appList = [.demo] }
        // A missing, unreadable or garbled file ends here: "Error: TLS key FILE: …", exit 1.
        let tls = try tlsCertificate.flatMap { certificate in
            try tlsKey.map { try PusherLocalTLS.load(certificateFile: certificate, keyFile: $0) }
        }
        let configuration = PusherLocalConfiguration(
            host: host,
            port: port,
            apps: appList,
            activityTimeout: .seconds(activityTimeout),
            pongTimeout: .seconds(pongTimeout),
            controlEnabled: !noControl,
            webhookURL: webhook,
            webhooks: webhookSettings,
            subscriptionCountEvents: subscriptionCount,
            users: userSettings,
            tls: tls
        )
        let problems = configuration.problems
        if !problems.isEmpty { throw ValidationError(problems.joined(separator: "; ")) }
        let server = PusherLocalServer(configuration: configuration, logger: logger) { running in
            let apps = running.configuration.apps.map(\.description).joined(separator: ", ")
            // The ready line: stdout, exactly once, flushed (tests and scripts wait for it).
            let tls = running.configuration.tls == nil ? "" : " with TLS"
            print("pusher-local listening on \(running.host):\(running.port)\(tls) (apps: \(apps))")
            fflush(nil)  // all C streams; names no global, so no shared mutable state
        }
        let group = ServiceGroup(
            configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        )
        try await group.run()
    }
}
