import NIOCore
import NIOHTTP1

/// One request in flight on one connection: what to write, and where its answer goes.
struct HTTPExchange: Sendable {
    /// The request head (method, target, headers).
    let head: HTTPRequestHead
    /// The body bytes, if any: written with the head in one flush.
    let body: ByteBuffer?
    /// The request fails with a timeout at this instant and the connection is closed.
    let deadline: NIODeadline
    /// The timeout as a person reads it ("10 s"), for the error message.
    let timeoutText: String
    /// Completed once: with the response, or with an ``HTTPExchangeFailure``.
    let promise: EventLoopPromise<PusherHTTPResponse>
}
