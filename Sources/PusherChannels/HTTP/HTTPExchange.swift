import NIOCore
import NIOHTTP1

/// Where requests go: one keep-alive pool of connections per endpoint (scheme, host, port and
/// TLS trust). Two endpoints that differ only in their CA file never share a connection.
public struct PusherHTTPEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// Host name or IP address, as in the URL.
    public var host: String
    /// TCP port.
    public var port: Int
    /// HTTPS (TLS with SNI and host name verification) or plain HTTP.
    public var secure: Bool
    /// A PEM file of CA certificates to trust instead of the system roots (HTTPS only).
    public var caFile: String?

    /// An endpoint from its parts; `caFile` is ignored for plain HTTP.
    public init(host: String, port: Int, secure: Bool, caFile: String? = nil) {
        self.host = host
        self.port = port
        self.secure = secure
        self.caFile = secure ? caFile : nil
    }

    /// `host:port` (`[v6]:port`), as error messages name the server.
    public var description: String { "\(bracketedHost):\(port)" }

    /// The `Host` header: the port only when it is not the scheme's default.
    var hostHeader: String { port == (secure ? 443 : 80) ? bracketedHost : description }

    /// The host, an IPv6 address in brackets as in a URL.
    private var bracketedHost: String { host.contains(":") ? "[\(host)]" : host }
}

/// One HTTP/1.1 request for ``PusherHTTPConnectionPool``.
public struct PusherHTTPRequest: Sendable {
    /// The method (`GET`, `POST`).
    public var method: HTTPMethod
    /// The request target: path and query, e.g. `/apps/3/events?auth_key=…`.
    public var target: String
    /// The body, sent with `Content-Type: application/json` unless `headers` name another; `nil` for none.
    public var body: String?
    /// Extra headers (the pool sets `Host`, `Content-Length` and, for a body, `Content-Type` if absent).
    public var headers: HTTPHeaders

    /// A request from its parts.
    public init(method: HTTPMethod, target: String, body: String? = nil, headers: HTTPHeaders = [:]) {
        self.method = method
        self.target = target
        self.body = body
        self.headers = headers
    }
}

/// A complete HTTP response: the status and the whole body (at most 1 MiB).
public struct PusherHTTPResponse: Sendable {
    /// The status code, e.g. 200.
    public var status: Int
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: ByteBuffer

    /// The body as UTF-8 text (invalid sequences repaired).
    public var text: String { String(buffer: body) }
}

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

/// Why an exchange failed, in words an operator understands.
struct HTTPExchangeFailure: Error, Sendable, CustomStringConvertible {
    /// What happened, e.g. "connection refused to 127.0.0.1:6001".
    let message: String
    /// The peer closed (EOF or reset) before any byte of a response: on a reused keep-alive
    /// connection, the server may have closed it just as the request went out, so one retry on a
    /// fresh connection is safe (the server never read the request, or never acted on it).
    let peerClosedBeforeAnswer: Bool

    /// A failure that no retry will mend.
    init(_ message: String) {
        self.message = message
        self.peerClosedBeforeAnswer = false
    }

    /// The peer closed the connection without answering.
    static let closedBeforeAnswer = HTTPExchangeFailure(
        message: "the server closed the connection before answering", peerClosedBeforeAnswer: true)

    private init(message: String, peerClosedBeforeAnswer: Bool) {
        self.message = message
        self.peerClosedBeforeAnswer = peerClosedBeforeAnswer
    }

    /// The message.
    var description: String { message }
}

extension Duration {
    /// A short human form for messages: "300 ms", "10 s".
    var shortText: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// Whole nanoseconds, clamped to `Int64`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        guard seconds < Int64.max / 1_000_000_000 else { return Int64.max }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// A request to an auth endpoint's full URL, for ``PusherAuthorization/requestBuilder(_:)``: sent
/// through the client's ``PusherHTTPConnectionPool``, the reply decoded like an endpoint's.
public struct PusherAuthEndpointRequest: Sendable {
    /// `http://…` or `https://…` (system trust roots), with path and query.
    public var url: String
    /// The method; auth endpoints take `POST`.
    public var method: HTTPMethod
    /// Headers, e.g. `Authorization` and `Content-Type` (set it: the default is `application/json`).
    public var headers: HTTPHeaders
    /// The body, e.g. ``PusherAuthRequest/formBody``.
    public var body: String?

    /// A request from its parts.
    public init(url: String, method: HTTPMethod = .POST, headers: HTTPHeaders = [:], body: String? = nil) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
    }
}

extension PusherHTTPEndpoint {
    /// Splits an `http(s)://host[:port]/path?query` URL into its endpoint and request target;
    /// `nil` for another scheme, user info, an empty host or a bad port.
    static func split(url: String) -> (endpoint: PusherHTTPEndpoint, target: String)? {
        let secure: Bool
        let rest: Substring
        if url.lowercased().hasPrefix("https://") {
            (secure, rest) = (true, url.dropFirst("https://".count))
        } else if url.lowercased().hasPrefix("http://") {
            (secure, rest) = (false, url.dropFirst("http://".count))
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...].prefix { $0 != "#" })
        if !target.hasPrefix("/") { target = "/" + target }
        guard !authority.contains("@") else { return nil }
        let host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        var port = secure ? 443 : 80
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else { return nil }
            port = number
        }
        guard !host.isEmpty else { return nil }
        return (PusherHTTPEndpoint(host: String(host), port: port, secure: secure), target)
    }
}
