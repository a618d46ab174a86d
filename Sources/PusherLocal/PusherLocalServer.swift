import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Locking
import Logging
import NIOCore
import NIOWebSocket
import PusherProtocol
import ServerWarmUp
import ServiceLifecycle
import Synchronization

/// A local Pusher-compatible server (protocol 7 WebSocket + HTTP API) for development, the demo
/// and tests (docs/contract.md §6). Run it as a `Service`, or in tests with
/// ``withRunning(_:logger:_:)``, which binds a free port and stops the server afterwards.
///
/// It is a development server: one process, no clustering, no persistence, unbounded
/// per-connection send queues.
public struct PusherLocalServer: Service {
    public let configuration: PusherLocalConfiguration
    let logger: Logger
    let onListening: @Sendable (RunningPusherLocal) async -> Void

    /// - Parameters:
    ///   - onListening: called once, when the port is bound, with the actual port.
    public init(
        configuration: PusherLocalConfiguration,
        logger: Logger = Logger(label: "pusher-local"),
        onListening: @escaping @Sendable (RunningPusherLocal) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.onListening = onListening
    }

    /// Serves until graceful shutdown (SIGTERM in a `ServiceGroup`) or cancellation.
    public func run() async throws {
        let problems = configuration.problems
        if !problems.isEmpty { throw PusherLocalError("invalid configuration: " + problems.joined(separator: "; ")) }
        let webhooks = configuration.webhookURL.map {
            WebhookSender(url: $0, apps: self.configuration.apps, settings: self.configuration.webhooks, logger: self.logger)
        }
        let registry = AppRegistry(configuration: configuration, webhooks: webhooks, logger: self.logger)
        let configuration = self.configuration
        let logger = self.logger
        let onListening = self.onListening
        let connections = ConnectionHandler(registry: registry, configuration: configuration, logger: logger)
        let responder = HTTPAPIResponder(registry: registry, configuration: configuration, logger: logger)
        let channelConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: .seconds(60)),
            ws: .init(
                maxFrameSize: configuration.maxFrameSize,
                // Pusher keep-alive is done with pusher:ping (ActivityMonitor); the
                // client's WebSocket pings are still answered by swift-websocket.
                autoPing: .disabled,
                closeTimeout: .seconds(2)
            )
        )
        warmUpConnectionSetup(
            HTTP1WebSocketUpgradeChannel(
                responder: { _, _, _ in }, configuration: channelConfiguration, shouldUpgrade: { _, _, _ in .dontUpgrade })
        )
        let plain: HTTPServerBuilder = .http1WebSocketUpgrade(
            configuration: channelConfiguration,
            shouldUpgrade: { request, channel, _ in
                guard let path = request.path, path.hasPrefix("/app/") else { return .dontUpgrade }
                let remote = channel.remoteAddress.flatMap(Self.hostAndPort)
                return .upgrade(
                    [:],
                    { inbound, outbound, _ in
                        await connections.handle(path: path, remote: remote, inbound: inbound, outbound: outbound)
                    }
                )
            }
        )
        let app = Application(
            responder: responder,
            server: try configuration.tls.map { try HTTPServerBuilder.tls(plain, tlsConfiguration: $0.serverConfiguration) } ?? plain,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                let running = RunningPusherLocal(host: configuration.host, port: port, configuration: configuration, registry: registry)
                logger.info(
                    "pusher-local listening",
                    metadata: [
                        "server.host": "\(configuration.host)", "server.port": "\(port)",
                        "pusher.apps": "\(configuration.apps.map(\.description))", "server.tls": "\(configuration.tls != nil)",
                    ]
                )
                await onListening(running)
            },
            logger: logger
        )
        try await withThrowingDiscardingTaskGroup { group in
            if let webhooks {
                group.addTask { await webhooks.run() }
            }
            defer { webhooks?.finish() }
            try await app.run()
        }
    }

    /// Starts a server (use `port: 0` for a free port), runs `body` with it, then stops it —
    /// also when `body` throws. For tests in this package and the daemon's end-to-end tests.
    public static func withRunning<T: Sendable>(
        _ configuration: PusherLocalConfiguration,
        logger: Logger = Logger(label: "pusher-local"),
        _ body: @Sendable (RunningPusherLocal) async throws -> T
    ) async throws -> T {
        let (ready, readyContinuation) = AsyncStream.makeStream(of: RunningPusherLocal.self)
        let server = PusherLocalServer(configuration: configuration, logger: logger) { running in
            readyContinuation.yield(running)
            readyContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        return try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask {
                // Ends the wait below also when the server fails before listening.
                defer { readyContinuation.finish() }
                try await group.run()
                return nil
            }
            var iterator = ready.makeAsyncIterator()
            guard let running = await iterator.next() else {
                // The server ended before listening: surface its error.
                while let _ = try await tasks.next() {}
                throw PusherLocalError("pusher-local stopped before it was listening")
            }
            do {
                let result = try await body(running)
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }
}
