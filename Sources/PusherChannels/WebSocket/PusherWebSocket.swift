import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
@_spi(WSInternal) import WSCore

/// A WebSocket client connection: swift-websocket's `WebSocketClient` with our own connection set-up.
///
/// The connection and its opening handshake are ours (``WebSocketHandshakeHandler``: the 101 and
/// whatever the server sent behind it reach the WebSocket in order, also when they arrive in one
/// read with the end of the connection, which `WebSocketClient` 1.6.2 loses). The WebSocket itself
/// — pings answered while `inbound` is read, the close handshake and its timeout, fragments,
/// UTF-8 checks — is swift-websocket's `WebSocketHandler`, through its `WSInternal` SPI, exactly
/// as `WebSocketClient` runs it (its `WebSocketClientChannel.handle`), so the `inbound` and
/// `outbound` a handler sees are the same types with the same behaviour. Used by ``PusherClient``
/// and by the tests' WebSocket clients (`package`).
package enum PusherWebSocket {
    /// The handler's context (`WebSocketClient.Context` cannot be made outside swift-websocket).
    package struct Context: WebSocketContext {
        package let logger: Logger
    }

    /// What `WebSocketClientConfiguration` offered that we use.
    package struct Configuration: Sendable {
        /// Largest frame accepted (a larger one closes the connection with 1009).
        package var maxFrameSize: Int
        /// How long to wait for the server's close frame after ours.
        package var closeTimeout: Duration
        /// Reject text messages that are not UTF-8.
        package var validateUTF8: Bool
        /// WebSocket pings of our own.
        package var autoPing: AutoPingSetup
        /// The TLS server name (SNI and certificate check) when it is not the host.
        package var sniHostname: String?

        package init(
            maxFrameSize: Int, closeTimeout: Duration = .seconds(15), validateUTF8: Bool = false, autoPing: AutoPingSetup = .disabled,
            sniHostname: String? = nil
        ) {
            self.maxFrameSize = maxFrameSize
            self.closeTimeout = closeTimeout
            self.validateUTF8 = validateUTF8
            self.autoPing = autoPing
            self.sniHostname = sniHostname
        }
    }

    /// Where to connect: from `ws://HOST[:PORT]/PATH?QUERY` or `wss://…`.
    package struct Address: Sendable, Equatable {
        package var secure: Bool
        package var host: String
        package var port: Int
        /// Path and query, as the request line carries them.
        package var target: String
        /// Whether the URL named the port (the `Host` header then names it too).
        package var explicitPort: Bool

        package init?(url: String) {
            let scheme: Substring
            var rest: Substring
            if url.hasPrefix("ws://") {
                (scheme, rest) = ("ws", url.dropFirst(5))
            } else if url.hasPrefix("wss://") {
                (scheme, rest) = ("wss", url.dropFirst(6))
            } else {
                return nil
            }
            secure = scheme == "wss"
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            rest = rest.dropFirst(authority.count)
            target = rest.isEmpty ? "/" : rest.hasPrefix("?") ? "/" + rest : String(rest)
            var hostPart = authority
            var portPart: Substring?
            if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
                hostPart = authority[authority.index(after: authority.startIndex)..<close]
                let after = authority[authority.index(after: close)...]
                if after.hasPrefix(":") { portPart = after.dropFirst() }
            } else if let colon = authority.lastIndex(of: ":") {
                hostPart = authority[..<colon]
                portPart = authority[authority.index(after: colon)...]
            }
            guard !hostPart.isEmpty else { return nil }
            host = String(hostPart)
            explicitPort = portPart != nil
            if let portPart {
                guard let number = Int(portPart), (1...65535).contains(number) else { return nil }
                port = number
            } else {
                port = secure ? 443 : 80
            }
        }

        /// `Host:` as `WebSocketClient` sends it: with the port when the URL has one.
        var hostHeader: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return explicitPort ? "\(name):\(port)" : name
        }

        /// `Origin:` as `WebSocketClient` sends it.
        var origin: String { (secure ? "wss" : "ws") + "://" + host }
    }

    /// Connects to `url`, runs `handler` with the WebSocket and returns the server's close frame
    /// (`nil` when there was none), like `WebSocketClient.connect`.
    ///
    /// `opened` is called with the connection as soon as it is open, before the opening handshake:
    /// closing it then ends the wait for an upgrade answer that may never come (the caller's
    /// handshake timeout; without it only cancelling the task could).
    ///
    /// - Throws: an invalid URL, a failed connection or handshake (``WebSocketHandshakeError``),
    ///   or what the WebSocket or `handler` threw.
    package static func connect(
        url: String,
        configuration: Configuration,
        tlsConfiguration: TLSConfiguration? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        opened: @Sendable (any Channel) -> Void = { _ in },
        handler: @escaping WebSocketDataHandler<Context>
    ) async throws -> WebSocketCloseFrame? {
        guard let address = Address(url: url) else { throw WebSocketHandshakeError("invalid WebSocket URL \(url)") }
        let sslContext = try address.secure ? NIOSSLContext(configuration: tlsConfiguration ?? .makeClientConfiguration()) : nil
        // As WebSocketClient does: the host is the TLS server name unless one is given. NIOSSL
        // refuses an IP address there (`cannotUseIPAddressInSNI`), which the bridge reports as
        // "set host to a DNS name" (Sources/BridgeCore/Bridge/ConnectionFailures.swift).
        let serverName = configuration.sniHostname ?? address.host
        let maxFrameSize = configuration.maxFrameSize
        let (channel, upgraded) = try await ClientBootstrap(group: eventLoopGroup)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(host: address.host, port: address.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handshake = WebSocketHandshakeHandler(
                        target: address.target, hostHeader: address.hostHeader, origin: address.origin, maxFrameSize: maxFrameSize,
                        eventLoop: channel.eventLoop)
                    do {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(
                                NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                        }
                        try channel.pipeline.syncOperations.addHandler(handshake)
                    } catch {
                        handshake.upgraded.fail(error)
                        throw error
                    }
                    return (channel, handshake.upgraded.futureResult)
                }
            }
        opened(channel)
        // A cancelled task (the client stopping) does not wait for an answer that may never come.
        let webSocket = try await withTaskCancellationHandler {
            try await upgraded.get()
        } onCancel: {
            channel.close(promise: nil)
        }
        logger.debug("WebSocket connected", metadata: ["url": "\(url)"])
        return try await WebSocketHandler.handle(
            type: .client,
            configuration: .init(
                extensions: [],
                autoPing: configuration.autoPing,
                closeTimeout: configuration.closeTimeout,
                validateUTF8: configuration.validateUTF8,
                ignoreUncleanSSLShutdownErrors: false,
                maxFrameSize: configuration.maxFrameSize
            ),
            asyncChannel: webSocket,
            context: Context(logger: logger),
            handler: handler
        )
    }
}
