import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The last handler of a pooled connection's pipeline: writes one ``HTTPExchange`` at a time and
/// completes its promise from the decoded response parts (NIOHTTP1's `HTTPResponseDecoder` does the
/// parsing: status line, headers, Content-Length, chunked, read-until-close).
///
/// It owns the connection's timers: the request deadline (close and fail with a timeout) and the
/// idle timeout between requests (close). It closes the connection after a `Connection: close` or
/// HTTP/1.0 reply, a body over the limit, a malformed reply and any error; the pool learns of every
/// close from the channel's `closeFuture`.
final class HTTPExchangeHandler: ChannelDuplexHandler {
    /// Decoded response parts from `HTTPResponseDecoder`.
    typealias InboundIn = HTTPClientResponsePart
    /// Requests from the pool.
    typealias OutboundIn = HTTPExchange
    /// Request parts for `HTTPRequestEncoder`.
    typealias OutboundOut = HTTPClientRequestPart

    /// Where the connection is in its request/response cycle.
    private enum State {
        /// No request in flight: ready for one (the idle timer runs).
        case idle
        /// The request is written; no response part has arrived.
        case awaitingHead(EventLoopPromise<PusherHTTPResponse>)
        /// The head has arrived; body parts are being collected.
        case receivingBody(EventLoopPromise<PusherHTTPResponse>, HTTPResponseHead, ByteBuffer)
        /// The connection is closed or closing: nothing more is accepted.
        case closed
    }

    /// The server as error messages name it (`host:port`).
    private let server: String
    /// The TLS server name for handshake messages; `nil` for plain HTTP.
    private let tlsHost: String?
    /// How long a connection may stay idle before it is closed.
    private let idleTimeout: TimeAmount
    /// The largest response body accepted.
    private let maximumBodyBytes: Int
    private var state = State.idle
    private var deadlineTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    /// Completed when the connection can take a request: at once for HTTP, after the TLS handshake
    /// for HTTPS; failed with the reason when it closes first.
    private let ready: EventLoopPromise<Void>?
    /// Why the connection closed, for a request written after that (it gets this reason).
    private var closedBy: HTTPExchangeFailure?

    /// A handler for a connection to `server`; `tlsHost` names the TLS peer when the connection is
    /// HTTPS; `ready` is completed when the connection can take a request.
    init(server: String, tlsHost: String?, idleTimeout: TimeAmount, maximumBodyBytes: Int, ready: EventLoopPromise<Void>? = nil) {
        self.ready = ready
        self.server = server
        self.tlsHost = tlsHost
        self.idleTimeout = idleTimeout
        self.maximumBodyBytes = maximumBodyBytes
    }

    /// A plain HTTP connection is ready. (The idle timer starts after the first answer: the pool
    /// opens a connection for a request, which a slow hand-over must not lose to the timer.)
    func channelActive(context: ChannelHandlerContext) {
        if tlsHost == nil { ready?.succeed() }
        context.fireChannelActive()
    }

    /// The TLS handshake is done (certificate and host name verified): the connection is ready.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { ready?.succeed() }
        context.fireUserInboundEventTriggered(event)
    }

    /// Writes the request head and body; the flush that follows (`writeAndFlush`) sends both at once.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        guard case .idle = state, context.channel.isActive else {
            // Closed while idle (the pool hands out only active connections, so this is the race
            // of a close just before the write): the request never reached the server.
            if case .closed = state {
                exchange.promise.fail(closedBy ?? HTTPExchangeFailure.closedBeforeAnswer)
            } else if !context.channel.isActive {
                exchange.promise.fail(HTTPExchangeFailure.closedBeforeAnswer)
            } else {
                exchange.promise.fail(HTTPExchangeFailure("internal error: a second request on a busy connection"))
            }
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        idleTimer?.cancel()
        idleTimer = nil
        state = .awaitingHead(exchange.promise)
        let timeoutText = exchange.timeoutText
        deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: exchange.deadline) { [self] in
            fail(HTTPExchangeFailure("no response within \(timeoutText)"), context: context)
        }
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if let body = exchange.body {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        // A failed write (reset, TLS) fails the request with this handler's words before the pool's
        // fallback (which covers a request that never reached this handler) sees it.
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(.end(nil)), promise: written)
        written.futureResult.assumeIsolated().whenFailure { [self] error in
            fail(failure(for: error), context: context)
        }
        if let promise { written.futureResult.cascade(to: promise) }
    }

    /// Collects the response: the head, body parts up to the limit, then completes at `.end`.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), state) {
        case (.head(let head), .awaitingHead(let promise)):
            // The parser takes any number; a status is three digits (RFC 9110 §15).
            guard (100...999).contains(head.status.code) else {
                fail(HTTPExchangeFailure("malformed HTTP response: status \(head.status.code)"), context: context)
                return
            }
            // 1xx interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100..<200).contains(head.status.code) && head.status.code != 101 { return }
            let capacity = head.headers.first(name: "content-length").flatMap(Int.init).map { min($0, maximumBodyBytes) } ?? 0
            state = .receivingBody(promise, head, context.channel.allocator.buffer(capacity: capacity))
        case (.body(var part), .receivingBody(let promise, let head, var body)):
            guard body.readableBytes + part.readableBytes <= maximumBodyBytes else {
                fail(HTTPExchangeFailure("response body over \(Self.size(maximumBodyBytes))"), context: context)
                return
            }
            state = .idle  // Drops the state's reference so that `body` is not copied on write.
            body.writeBuffer(&part)
            state = .receivingBody(promise, head, body)
        case (.end, .receivingBody(let promise, let head, let body)):
            deadlineTimer?.cancel()
            deadlineTimer = nil
            state = .idle
            // `isKeepAlive`: HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `keep-alive`.
            if head.isKeepAlive {
                armIdleTimer(context: context)
            } else {
                state = .closed
                context.close(promise: nil)
            }
            promise.succeed(PusherHTTPResponse(status: Int(head.status.code), headers: head.headers, body: body))
        case (_, .closed):
            break
        case (.head, _), (.body, _), (.end, _):
            fail(HTTPExchangeFailure("malformed HTTP response: a response part out of order"), context: context)
        }
    }

    /// A decoder, TLS or socket error: the request fails with a message naming the cause.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(failure(for: error), context: context)
    }

    /// The connection closed: a request without any response part fails as closed-before-answer
    /// (retryable on a reused connection); one cut off mid-body fails as such.
    func channelInactive(context: ChannelHandlerContext) {
        fail(HTTPExchangeFailure.closedBeforeAnswer, context: context)
        idleTimer?.cancel()
        idleTimer = nil
        context.fireChannelInactive()
    }

    /// Fails the request in flight (if any) and closes the connection.
    private func fail(_ failure: HTTPExchangeFailure, context: ChannelHandlerContext) {
        if closedBy == nil { closedBy = failure }
        ready?.fail(failure)  // Ignored once the connection was ready.
        deadlineTimer?.cancel()
        deadlineTimer = nil
        let previous = state
        state = .closed
        switch previous {
        case .awaitingHead(let promise):
            promise.fail(failure)
        case .receivingBody(let promise, _, _):
            promise.fail(
                failure.peerClosedBeforeAnswer
                    ? HTTPExchangeFailure("the server closed the connection in the middle of its answer") : failure)
        case .idle, .closed:
            break
        }
        if case .closed = previous { return }
        if context.channel.isActive { context.close(promise: nil) }
    }

    private func armIdleTimer(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: idleTimeout) { [self] in
            guard case .idle = state else { return }
            state = .closed
            context.close(promise: nil)
        }
    }

    /// The operator's words for a pipeline error.
    private func failure(for error: any Error) -> HTTPExchangeFailure {
        let answered: Bool
        if case .receivingBody = state { answered = true } else { answered = false }
        switch error {
        case let error as HTTPParserError:
            return HTTPExchangeFailure("malformed HTTP response: \(error)")
        case ChannelError.ioOnClosedChannel where !answered, ChannelError.eof where !answered,
            ChannelError.outputClosed where !answered:
            return .closedBeforeAnswer
        case let error as IOError where !answered && [ECONNRESET, EPIPE].contains(error.errnoCode):
            return .closedBeforeAnswer
        case NIOSSLError.uncleanShutdown where !answered:
            // The peer closed TCP without TLS close_notify: an idle close seen as the request went out.
            return .closedBeforeAnswer
        case let error as NIOSSLError:
            return HTTPExchangeFailure("TLS handshake with \(tlsHost ?? server) failed: \(error)")
        case let error as BoringSSLError:
            return HTTPExchangeFailure("TLS handshake with \(tlsHost ?? server) failed: \(error)")
        default:
            return HTTPExchangeFailure("connection to \(server) failed: \(error)")
        }
    }
}

extension HTTPExchangeHandler {
    /// `16 MiB`, `64 KiB` or `1000 bytes`: a limit in an operator's words.
    static func size(_ bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
        if bytes >= 1 << 10, bytes % (1 << 10) == 0 { return "\(bytes >> 10) KiB" }
        return "\(bytes) bytes"
    }
}
