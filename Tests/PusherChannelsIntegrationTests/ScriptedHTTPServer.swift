import Foundation
import Locking
import NIOCore
import NIOPosix
import PusherChannels

/// What the scripted HTTP server does with one request.
enum ScriptedReply: Sendable {
    /// Writes these bytes; closes the connection afterwards when `close`.
    case send(String, close: Bool = false)
    /// Writes these bytes after `delay`.
    case sendAfter(TimeAmount, String)
    /// Closes the connection without a byte of answer.
    case closeWithoutAnswer
    /// Never answers (the connection stays open).
    case silence
}

/// One request the scripted server read.
struct ScriptedRequest: Sendable {
    /// 0 for the first connection accepted, 1 for the next, …
    let connection: Int
    /// 0 for the first request on its connection, …
    let index: Int
    /// The request line and headers, as sent.
    let head: String
    /// The body bytes.
    let body: [UInt8]
}

/// The scripted servers' event loop.
let scriptedServerLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers each request as the test's script says
/// (raw bytes, so replies can be chunked, oversized or malformed) and counts connections.
final class ScriptedHTTPServer: Sendable {
    let script: @Sendable (ScriptedRequest) -> ScriptedReply
    private let accepted = Locked(0)
    private let closed = Locked(0)
    private let seen = Locked<[ScriptedRequest]>([])
    private let channel: Locked<(any Channel)?> = Locked(nil)

    init(_ script: @escaping @Sendable (ScriptedRequest) -> ScriptedReply) { self.script = script }

    /// Connections accepted so far.
    var connections: Int { accepted.withLock { $0 } }
    /// Connections closed (by either side) so far.
    var closedConnections: Int { closed.withLock { $0 } }
    /// Every request read, in order.
    var requests: [ScriptedRequest] { seen.withLock { $0 } }

    /// Runs `body` with the server listening; returns the endpoint to reach it.
    static func with<T: Sendable>(
        _ script: @escaping @Sendable (ScriptedRequest) -> ScriptedReply,
        _ body: (ScriptedHTTPServer, PusherHTTPEndpoint) async throws -> T
    ) async throws -> T {
        let server = ScriptedHTTPServer(script)
        // A loop of its own (as the pools under test have: HTTPConnectionPoolTests.swift's
        // `poolTestLoops`): the singleton's loops are kept busy by the suites beside these.
        let listener = try await ServerBootstrap(group: scriptedServerLoops)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let index = server.accepted.withLock { count in
                    defer { count += 1 }
                    return count
                }
                channel.closeFuture.whenComplete { _ in server.closed.withLock { $0 += 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptedHTTPConnectionHandler(server: server, connection: index))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let endpoint = PusherHTTPEndpoint(host: "127.0.0.1", port: listener.localAddress?.port ?? 0, secure: false)
        do {
            let result = try await body(server, endpoint)
            try? await listener.close()
            return result
        } catch {
            try? await listener.close()
            throw error
        }
    }

    fileprivate func record(_ request: ScriptedRequest) { seen.withLock { $0.append(request) } }
}

/// Reads requests (head up to the blank line, then `Content-Length` bytes) and plays the script.
private final class ScriptedHTTPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let server: ScriptedHTTPServer
    let connection: Int
    var pending: [UInt8] = []
    var served = 0

    init(server: ScriptedHTTPServer, connection: Int) {
        self.server = server
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        pending += Array(buffer: unwrapInboundIn(data))
        while let request = takeRequest() {
            server.record(request)
            served += 1
            switch server.script(request) {
            case .send(let text, let close):
                let written = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: text)))
                if close { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
            case .sendAfter(let delay, let text):
                context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
                    context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
                }
            case .closeWithoutAnswer:
                context.close(promise: nil)
                return
            case .silence:
                break
            }
        }
    }

    private func takeRequest() -> ScriptedRequest? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = pending.indices.first(where: { pending[$0...].starts(with: separator) }) else { return nil }
        let head = String(decoding: pending[..<end], as: UTF8.self)
        let length =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        let bodyStart = end + separator.count
        guard pending.count >= bodyStart + length else { return nil }
        let body = Array(pending[bodyStart..<bodyStart + length])
        pending.removeFirst(bodyStart + length)
        return ScriptedRequest(connection: connection, index: served, head: head, body: body)
    }
}
