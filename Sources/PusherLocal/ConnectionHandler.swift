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
        let signinTimeout = live.signinTimeout
        await withTaskGroup(of: Role.self) { group in
            if let signinTimeout {
                group.addTask {
                    // The app requires sign-in: the hub closes the connection with 4009 unless it
                    // signed in by now (docs/pusher-protocol.md §1, "User sign-in").
                    do {
                        try await Task.sleep(for: signinTimeout)
                    } catch {
                        return .timer
                    }
                    live.signinDeadlineReached(id)
                    return .timer
                }
            }
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
