import NIOCore
import NIOHTTP1

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
