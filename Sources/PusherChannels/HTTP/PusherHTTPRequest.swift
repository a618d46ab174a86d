import NIOCore
import NIOHTTP1

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
