import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why an HTTP API call failed, with the status and whether retrying may help.
public struct PusherHTTPError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Sendable, Hashable {
        case invalidRequest
        case network
        case status
        case unexpectedResponse
    }

    private let kind: Kind
    /// A sentence for logs.
    public let message: String
    /// The HTTP status, when the server answered.
    public let status: Int?
    /// The response body, when the server answered with an error status.
    public let body: String?

    private init(_ kind: Kind, _ message: String, status: Int? = nil, body: String? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
        self.body = body
    }

    /// Refused before sending: a name, count or size is invalid. Never retryable.
    public static func invalidRequest(_ message: String) -> PusherHTTPError { .init(.invalidRequest, message) }
    /// No answer: connection refused, reset, TLS or timeout. Retryable.
    public static func network(_ message: String) -> PusherHTTPError { .init(.network, "HTTP request failed: \(message)") }
    /// The server answered with a non-2xx status.
    public static func status(_ status: Int, body: String) -> PusherHTTPError {
        .init(.status, "Pusher HTTP API answered \(status): \(body.prefix(200))", status: status, body: body)
    }
    /// A 2xx answer we could not read.
    public static func unexpectedResponse(_ message: String) -> PusherHTTPError { .init(.unexpectedResponse, message) }

    /// Whether retrying (with backoff) may succeed: network errors, 5xx and 429 — not other
    /// 4xx, not invalid requests (docs/contract.md §5.6).
    public var isRetryable: Bool {
        switch kind {
        case .network: true
        case .status: status.map { $0 >= 500 || $0 == 429 } ?? false
        case .invalidRequest, .unexpectedResponse: false
        }
    }

    /// Whether the request was refused before sending.
    public var isInvalidRequest: Bool { kind == .invalidRequest }

    public var description: String { message }
}
