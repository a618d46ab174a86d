import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Locking
import Logging
import NIOCore
import NIOWebSocket
import PusherProtocol
import ServiceLifecycle
import Synchronization

/// The apps of a running server, looked up by id (HTTP API) or key (WebSocket path).
final class AppRegistry: Sendable {
    let byID: [String: LiveApp]
    let byKey: [String: LiveApp]
    let apps: [LiveApp]
    private let nextConnection = Atomic<UInt64>(1)

    init(configuration: PusherLocalConfiguration, webhooks: WebhookSender?, logger: Logger) {
        let seconds = Int(configuration.activityTimeout.components.seconds)
        let apps = configuration.apps.map {
            LiveApp(
                app: $0, activityTimeoutSeconds: seconds, subscriptionCountEvents: configuration.subscriptionCountEvents,
                webhooks: webhooks,
                logger: logger)
        }
        self.apps = apps
        self.byID = Dictionary(apps.map { ($0.app.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.byKey = Dictionary(apps.map { ($0.app.key, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func makeConnectionID() -> ConnectionID {
        ConnectionID(nextConnection.wrappingAdd(1, ordering: .relaxed).oldValue)
    }
}

/// Why pusher-local could not start.
public struct PusherLocalError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for a person.
    public let description: String
    init(_ description: String) { self.description = description }
}

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
        let plain: HTTPServerBuilder = .http1WebSocketUpgrade(
            configuration: .init(
                http1: .init(idleTimeout: .seconds(60)),
                ws: .init(
                    maxFrameSize: configuration.maxFrameSize,
                    // Pusher keep-alive is done with pusher:ping (ActivityMonitor); the
                    // client's WebSocket pings are still answered by swift-websocket.
                    autoPing: .disabled,
                    closeTimeout: .seconds(2)
                )
            ),
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

/// A started pusher-local: its address, and in-process versions of the control endpoints.
public struct RunningPusherLocal: Sendable {
    /// The bound host.
    public let host: String
    /// The ACTUAL bound port (also when the configuration said 0).
    public let port: Int
    /// The configuration it runs with.
    public let configuration: PusherLocalConfiguration
    let registry: AppRegistry

    /// `ws://HOST:PORT/app/KEY?protocol=7` (`wss://` with TLS) for the first app, or for `app`.
    public func webSocketURL(key: String? = nil) -> String {
        (configuration.tls == nil ? "ws" : "wss") + "://\(host):\(port)/app/\(key ?? configuration.apps[0].key)?protocol=7"
    }

    /// `http://HOST:PORT` (`https://` with TLS).
    public var httpURL: String { (configuration.tls == nil ? "http" : "https") + "://\(host):\(port)" }

    /// The first configured app.
    public var app: PusherLocalApp { configuration.apps[0] }

    /// Closes every connection of the app with `code` (e.g. 4200, 4100, 4001); returns how many.
    @discardableResult
    public func disconnectAll(appID: String? = nil, code: UInt16, reason: String = "closed by pusher-local control") -> Int {
        live(appID).map { AppControl(live: $0).disconnectAll(code: code, reason: reason) } ?? 0
    }

    /// Sends `bytes` as one raw text frame (even malformed JSON or invalid UTF-8) to every
    /// connection; returns how many.
    @discardableResult
    public func sendRaw(appID: String? = nil, _ bytes: [UInt8]) -> Int {
        live(appID).map { AppControl(live: $0).sendRaw(bytes) } ?? 0
    }

    /// Sends `text` as one raw text frame to every connection; returns how many.
    @discardableResult
    public func sendRaw(appID: String? = nil, _ text: String) -> Int {
        sendRaw(appID: appID, Array(text.utf8))
    }

    /// Whether `pusher:ping` is answered (false provokes client pong timeouts).
    public func setAnswersPings(appID: String? = nil, _ answer: Bool) {
        live(appID)?.state.withLock { $0.faults.answerPings = answer }
    }

    /// Accept-then-close every new connection with `code` (e.g. 4001 to emulate a refusal loop);
    /// `nil` accepts again.
    public func refuseConnections(appID: String? = nil, code: UInt16?, reason: String = "refused by pusher-local control") {
        live(appID)?.state.withLock { state in
            state.faults.refusal = code.map { ($0, reason) }
        }
    }

    /// Publishes an event as the HTTP API would (validated, not signed).
    public func publish(appID: String? = nil, _ request: PublishRequest) throws(APIError) {
        guard let live = live(appID) else { throw APIError(status: 404, message: "Unknown app") }
        if let error = AppHub.validate(request) { throw error }
        let now = ContinuousClock.now
        live.perform { state in ((), state.hub.publish(request, now: now)) }
    }

    /// The app's counters and occupancy.
    public func stats(appID: String? = nil) -> PusherLocalStats? {
        live(appID)?.stats()
    }

    func live(_ appID: String?) -> LiveApp? {
        guard let appID else { return registry.apps.first }
        return registry.byID[appID]
    }
}

/// Runs one WebSocket connection: the handshake checks, then a reader, a writer and a
/// keep-alive timer task until either side closes.
struct ConnectionHandler: Sendable {
    let registry: AppRegistry
    let configuration: PusherLocalConfiguration
    let logger: Logger

    /// Supported protocol versions: pusher-js sends 7, pysher 6.
    static let protocols = 5...7

    /// Decides whether a path `/app/KEY?protocol=N` may connect, or which close code it gets
    /// (docs/pusher-protocol.md §1, "Close codes": 4001 unknown app, 4007 unsupported, 4008 missing protocol).
    static func admission(path: String, registry: AppRegistry) -> Result<LiveApp, CloseRefusal> {
        let (pathPart, query) = splitPathAndQuery(path)
        let key = String(pathPart.dropFirst("/app/".count))
        guard let live = registry.byKey[key] else {
            return .failure(CloseRefusal(code: PusherCloseCode.appDoesNotExist.rawValue, reason: "App key \(key) does not exist"))
        }
        let params = parseQuery(query)
        guard let version = params.first(where: { $0.0 == "protocol" })?.1, !version.isEmpty else {
            return .failure(CloseRefusal(code: PusherCloseCode.noProtocolVersionSupplied.rawValue, reason: "No protocol version supplied"))
        }
        guard let number = Int(version), protocols.contains(number) else {
            return .failure(
                CloseRefusal(code: PusherCloseCode.unsupportedProtocolVersion.rawValue, reason: "Unsupported protocol version \(version)"))
        }
        return .success(live)
    }

    /// A close code and reason for a refused connection.
    struct CloseRefusal: Error {
        var code: UInt16
        var reason: String
    }

    enum Role { case reader, writer, timer, shutdown }

    /// How long a connection may take to finish its close handshake once the server shuts down.
    static let shutdownGrace: Duration = .seconds(2)

    /// Refuses a just-upgraded connection: `pusher:error` with the code, then at once the close
    /// frame with the same code (docs/pusher-protocol.md §1, "Close codes"), as hosted Pusher does.
    /// Both usually reach the client with the 101 response and the FIN (swift-websocket's server
    /// half-closes right after its close frame): clients must cope, and PusherChannels does
    /// (Sources/PusherChannels/README.md, "The WebSocket connection").
    static func refuse(_ outbound: WebSocketOutboundWriter, code: UInt16, reason: String) async {
        try? await outbound.write(.text(ServerFrame.error(reason, code: Int(code))))
        try? await outbound.close(WebSocketErrorCode(codeNumber: Int(code)), reason: reason)
    }

    func handle(path: String, remote: String?, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let live: LiveApp
        switch Self.admission(path: path, registry: registry) {
        case .failure(let refusal):
            logger.info("Connection refused", metadata: ["pusher.close_code": "\(refusal.code)", "reason": "\(refusal.reason)"])
            await Self.refuse(outbound, code: refusal.code, reason: refusal.reason)
            return
        case .success(let found):
            live = found
        }
        let refusal = live.state.withLock { state -> (code: UInt16, reason: String)? in
            guard let refusal = state.faults.refusal else { return nil }
            state.hub.refused()
            return refusal
        }
        if let refusal {
            live.logger.info("Connection refused by control switch", metadata: ["pusher.close_code": "\(refusal.code)"])
            await Self.refuse(outbound, code: refusal.code, reason: refusal.reason)
            return
        }
        let id = registry.makeConnectionID()
        let (stream, outbox) = Outbox.make(limit: configuration.maxQueuedFrames)
        let socketID = live.connect(id, outbox: outbox, remote: remote)
        var connectionLogger = live.logger
        connectionLogger[metadataKey: "pusher.socket_id"] = .string(socketID)
        let logger = connectionLogger
        logger.debug("Connection opened")
        let monitor = ActivityClock(
            ActivityMonitor(activityTimeout: configuration.activityTimeout, pongTimeout: configuration.pongTimeout, now: .now))
        let maxFrameSize = configuration.maxFrameSize
        await withTaskGroup(of: Role.self) { group in
            group.addTask {
                // Writer: the only task that writes to this socket, so frames keep their order.
                for await item in stream {
                    do {
                        switch item {
                        case .text(let buffer):
                            try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: buffer)))
                        case .close(let code, let reason):
                            logger.debug("Closing connection", metadata: ["pusher.close_code": "\(code)"])
                            try await outbound.close(WebSocketErrorCode(codeNumber: Int(code)), reason: reason)
                            return .writer
                        }
                    } catch {
                        return .writer
                    }
                }
                return .writer
            }
            group.addTask {
                var iterator = inbound.makeAsyncIterator()
                while true {
                    let message: WebSocketMessage?
                    do {
                        message = try await iterator.nextMessage(maxSize: maxFrameSize)
                    } catch {
                        logger.debug("Connection read failed", metadata: ["error": "\(error)"])
                        return .reader
                    }
                    guard let message else { return .reader }
                    let now = ContinuousClock.now
                    monitor.state.withLock { $0.receivedFrame(now: now) }
                    switch message {
                    case .text(let text):
                        logger.trace("Frame received", metadata: ["pusher.frame": "\(text.prefix(200))"])
                        live.received(text, from: id, now: now, logger: logger)
                    case .binary:
                        logger.debug("Binary frame ignored")
                        live.perform { state in
                            ((), [.send(id, ServerFrame.error("Binary frames are not supported; send JSON text frames", code: nil))])
                        }
                    }
                }
            }
            group.addTask {
                // Keep-alive timer (ActivityMonitor decides; this task only sleeps and acts).
                while !Task.isCancelled {
                    let deadline = monitor.state.withLock { $0.deadline }
                    do {
                        try await Task.sleep(until: deadline, clock: .continuous)
                    } catch {
                        return .timer
                    }
                    switch monitor.state.withLock({ $0.deadlineReached(now: .now) }) {
                    case .none:
                        continue
                    case .sendPing:
                        outbox.send(.text(ByteBuffer(string: ServerFrame.ping)))
                    case .closeForInactivity:
                        outbox.send(.close(code: PusherCloseCode.pongReplyNotReceived.rawValue, reason: "Pong reply not received"))
                        // Stay until the writer has sent the close and the group ends.
                        try? await Task.sleep(for: .seconds(3600))
                        return .timer
                    }
                }
                return .timer
            }
            group.addTask {
                // Server shutdown (SIGTERM): ask the client to reconnect (4200), and end the
                // connection after a grace period even if the client never answers the close
                // (a client that stopped reading would otherwise hold the shutdown forever).
                do {
                    try await gracefulShutdown()
                } catch {
                    return .timer
                }
                outbox.send(.close(code: PusherCloseCode.genericReconnectImmediately.rawValue, reason: "pusher-local is shutting down"))
                try? await Task.sleep(for: Self.shutdownGrace)
                return .shutdown
            }
            // The connection is over when the reader (client gone) or the writer (close sent) ends.
            while let role = await group.next() {
                if role != .timer { break }
            }
            group.cancelAll()
        }
        outbox.continuation.finish()
        live.disconnect(id)
        logger.debug("Connection closed")
    }
}

/// The keep-alive state of one connection, shared by its reader (activity) and timer tasks.
final class ActivityClock: Sendable {
    let state: Locked<ActivityMonitor>
    init(_ monitor: ActivityMonitor) { state = Locked(monitor) }
}

/// `/path?query` split at the first `?`.
func splitPathAndQuery(_ target: String) -> (path: String, query: String) {
    guard let mark = target.firstIndex(of: "?") else { return (target, "") }
    return (String(target[..<mark]), String(target[target.index(after: mark)...]))
}

/// Decodes `a=1&b=x%2Cy` into pairs (percent-decoding, `+` as space), keeping order and repeats.
func parseQuery(_ query: String) -> [(String, String)] {
    guard !query.isEmpty else { return [] }
    return query.split(separator: "&").map { pair in
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = percentDecoded(parts[0])
        let value = parts.count > 1 ? percentDecoded(parts[1]) : ""
        return (name, value)
    }
}

/// Percent-decoding with `+` as space (form encoding, as Python's `urlencode` produces).
/// Invalid escapes are kept as they are.
func percentDecoded(_ text: Substring) -> String {
    var out: [UInt8] = []
    let bytes = Array(text.utf8)
    var i = 0
    func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
    while i < bytes.count {
        let b = bytes[i]
        if b == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hex(bytes[i + 1]), let lo = hex(bytes[i + 2]) {
            out.append(hi << 4 | lo)
            i += 3
        } else if b == UInt8(ascii: "+") {
            out.append(UInt8(ascii: " "))
            i += 1
        } else {
            out.append(b)
            i += 1
        }
    }
    return String(decoding: out, as: UTF8.self)
}
