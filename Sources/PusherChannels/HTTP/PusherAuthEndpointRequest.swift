import NIOCore
import NIOHTTP1

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
