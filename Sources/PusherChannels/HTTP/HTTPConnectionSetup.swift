import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a pooled connection's pipeline is built, and how a failed connect reads to an operator.
///
/// The pipeline, head to tail: `NIOSSLClientHandler` (HTTPS only; SNI and host name verification
/// against ``PusherHTTPEndpoint/host``), `HTTPRequestEncoder`, `HTTPResponseDecoder` (which also
/// watches the requests go out, to know a HEAD reply has no body), ``HTTPExchangeHandler``.
struct HTTPExchangeHandlerSetup: Sendable {
    /// The server.
    let endpoint: PusherHTTPEndpoint
    /// The pool's cached context for the endpoint's trust roots; `nil` for plain HTTP.
    let tlsContext: NIOSSLContext?
    /// Idle connections close after this long.
    let idleTimeout: TimeAmount
    /// The largest response body accepted.
    let maximumBodyBytes: Int
    /// Completed when the connection can take a request (after the TLS handshake for HTTPS).
    let ready: EventLoopPromise<Void>

    /// Adds the handlers to a new channel (on its event loop, from the bootstrap's initialiser).
    func install(on channel: any Channel) throws {
        let pipeline = channel.pipeline.syncOperations
        if let tlsContext {
            // SNI takes a host name only; for an IP address the certificate is checked against the IP.
            let isAddress = (try? SocketAddress(ipAddress: endpoint.host, port: 0)) != nil
            try pipeline.addHandler(NIOSSLClientHandler(context: tlsContext, serverHostname: isAddress ? nil : endpoint.host))
        }
        try pipeline.addHTTPClientHandlers(leftOverBytesStrategy: .forwardBytes)
        try pipeline.addHandler(
            HTTPExchangeHandler(
                server: endpoint.description, tlsHost: tlsContext == nil ? nil : endpoint.host, idleTimeout: idleTimeout,
                maximumBodyBytes: maximumBodyBytes, ready: ready))
    }

    /// A connect error in words: refused, not resolved, timed out, or the error itself.
    static func connectFailure(_ error: any Error, endpoint: PusherHTTPEndpoint, timeoutText: String) -> HTTPExchangeFailure {
        if let failure = error as? HTTPExchangeFailure { return failure }
        if let error = error as? NIOConnectionError {
            if error.connectionErrors.contains(where: { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }) {
                return HTTPExchangeFailure("connection refused to \(endpoint)")
            }
            if error.connectionErrors.isEmpty {
                return HTTPExchangeFailure("could not resolve \(endpoint.host)")
            }
            let causes = error.connectionErrors.map { "\($0.target): \($0.error)" }.joined(separator: "; ")
            return HTTPExchangeFailure("could not connect to \(endpoint): \(causes)")
        }
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED {
            return HTTPExchangeFailure("connection refused to \(endpoint)")
        }
        if case ChannelError.connectTimeout = error {
            return HTTPExchangeFailure("no connection to \(endpoint) within \(timeoutText)")
        }
        return HTTPExchangeFailure("could not connect to \(endpoint): \(error)")
    }
}
