import Crypto
import NIOCore
import NIOWebSocket

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why the WebSocket opening handshake did not complete, in an operator's words.
struct WebSocketHandshakeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The client side of the WebSocket opening handshake (RFC 6455 §4.1) in one handler: it sends the
/// upgrade request, reads the response head, and — in the same `channelRead` that brought the end
/// of the 101 response — puts the WebSocket frame handlers and the `NIOAsyncChannel` in its place
/// and hands them the bytes that came behind the head. Whatever the server sent after its 101
/// (`pusher:error`, a close frame, the end of the connection) therefore reaches the WebSocket in the
/// order it was sent, even when all of it arrives in one read.
///
/// swift-websocket's `WebSocketClient` (1.6.2) upgrades with NIO's `NIOTypedHTTPClientUpgradeHandler`
/// behind a `ByteToMessageHandler(HTTPResponseDecoder)`. That decoder's removal is deferred to a
/// later event-loop task (`ByteToMessageHandler.removeHandler`), and the bytes it holds behind the
/// 101 are forwarded at removal only if no end of input was seen (`HTTPDecoder.decodeLast`: "only
/// if we haven't seen EOF"). NIO reads the data and the FIN of one readiness event together
/// (`BaseSocketChannel.readEOF0`), so a close sent with the 101 and followed by the server's
/// FIN was dropped, and so was the end of input (the upgrade handler passes it on before the
/// WebSocket handlers exist): the client waited forever on an open socket.
/// `Tests/PusherChannelsIntegrationTests/CloseRightAfterUpgradeTests.swift` shows it; pusher-local used to
/// wait 300 ms before such closes to hide it.
final class WebSocketHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A response head longer than this fails the handshake.
    static let maximumHeadBytes = 16 * 1024

    /// Completed with the WebSocket once the 101 is read, or failed with why not.
    let upgraded: EventLoopPromise<NIOAsyncChannel<WebSocketFrame, WebSocketFrame>>
    private let request: String
    private let expectedAccept: String
    private let maxFrameSize: Int
    private var received: ByteBuffer?
    private var requestSent = false
    private var finished = false

    /// A handshake for `target` (path and query) on `hostHeader`, on a channel of `eventLoop`.
    init(target: String, hostHeader: String, origin: String, maxFrameSize: Int, eventLoop: any EventLoop) {
        let key = NIOWebSocketClientUpgrader.randomRequestKey()
        request =
            "GET \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nOrigin: \(origin)\r\nConnection: Upgrade\r\n"
            + "Upgrade: websocket\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        expectedAccept = Self.accept(for: key)
        self.maxFrameSize = maxFrameSize
        upgraded = eventLoop.makePromise()
    }

    /// `Sec-WebSocket-Accept` for `key`: base64 of SHA-1 of the key and the RFC's GUID (RFC 6455 §4.2.2).
    static func accept(for key: String) -> String {
        Data(Insecure.SHA1.hash(data: Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendRequest(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        guard !finished else { return }
        finished = true
        upgraded.fail(WebSocketHandshakeError("the WebSocket handshake was abandoned"))
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    /// With TLS in front, the request waits in NIOSSL until its handshake is done.
    private func sendRequest(context: ChannelHandlerContext) {
        guard !requestSent else { return }
        requestSent = true
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard !finished else { return }
        if received == nil {
            received = bytes
        } else {
            received!.writeBuffer(&bytes)
        }
        guard var buffer = received else { return }
        guard let headLength = Self.headLength(in: buffer) else {
            if buffer.readableBytes > Self.maximumHeadBytes {
                fail(WebSocketHandshakeError("the WebSocket upgrade response head is over 16 KiB"), context: context)
            }
            return
        }
        let head = buffer.readString(length: headLength) ?? ""
        received = nil
        do {
            try check(head)
            try upgrade(context: context, leftOver: buffer)
        } catch {
            fail(error, context: context)
        }
    }

    /// The length of the response head including its blank line, once it is all there.
    static func headLength(in buffer: ByteBuffer) -> Int? {
        let view = buffer.readableBytesView
        var index = view.startIndex
        while index + 4 <= view.endIndex {
            if view[index] == 13, view[index + 1] == 10, view[index + 2] == 13, view[index + 3] == 10 {
                return index - view.startIndex + 4
            }
            index += 1
        }
        return nil
    }

    /// What NIO's WebSocket client upgrader checks: a 101, `Upgrade: websocket`, and the accept key.
    private func check(_ head: String) throws(WebSocketHandshakeError) {
        let lines = head.split(separator: "\r\n")
        let statusLine = lines.first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw WebSocketHandshakeError("malformed WebSocket upgrade response: \(statusLine.prefix(100))")
        }
        guard status == 101 else {
            throw WebSocketHandshakeError("the server refused the WebSocket upgrade: \(statusLine.prefix(100))")
        }
        var fields: [String: [String]] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = Self.trimmed(line[..<colon]).lowercased()
            fields[name, default: []].append(Self.trimmed(line[line.index(after: colon)...]))
        }
        guard fields["upgrade"]?.first?.lowercased() == "websocket" else {
            throw WebSocketHandshakeError("the WebSocket upgrade response does not upgrade to websocket")
        }
        guard fields["sec-websocket-accept"] == [expectedAccept] else {
            throw WebSocketHandshakeError("the WebSocket upgrade response has a wrong Sec-WebSocket-Accept")
        }
    }

    /// `text` without leading and trailing spaces and tabs (HTTP's optional whitespace).
    private static func trimmed(_ text: Substring) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// Turns the connection into a WebSocket now: frame handlers and the async channel after this
    /// handler, the bytes behind the head into them, this handler out (a synchronous removal). From
    /// here on every read and the end of input go to the WebSocket in order.
    private func upgrade(context: ChannelHandlerContext, leftOver: ByteBuffer) throws {
        let pipeline = context.pipeline.syncOperations
        try pipeline.addHandler(WebSocketFrameEncoder())
        try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
        try pipeline.addHandler(WebSocketProtocolErrorHandler(isServer: false))
        let webSocket = try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: context.channel)
        finished = true
        if leftOver.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(leftOver)) }
        pipeline.removeHandler(context: context, promise: nil)
        upgraded.succeed(webSocket)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(WebSocketHandshakeError("the server closed the connection during the WebSocket handshake"), context: context)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            fail(WebSocketHandshakeError("the server closed the connection during the WebSocket handshake"), context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error, context: context)
        context.fireErrorCaught(error)
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard !finished else { return }
        finished = true
        upgraded.fail(error)
        context.close(promise: nil)
    }
}
