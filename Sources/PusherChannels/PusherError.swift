/// An error the client reports to the application.
///
/// Shaped like swift-websocket's `WebSocketClientError`: a struct with a private code, static
/// factories, context fields and a human description.
public struct PusherError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case serverError
        case connectionRefused
        case gaveUp
        case subscriptionFailed
        case authorizationFailed
        case decryptionFailed
        case clientEventRejected
        case malformedFrame
        case invalidArgument
        case signInFailed
        case notConnected
        case transport
    }

    private let code: Code
    /// A sentence for logs and people.
    public let message: String
    /// The Pusher error or close code, when the server gave one (e.g. 4009, 4301).
    public let pusherCode: Int?
    /// The channel concerned, when there is one.
    public let channel: String?

    private init(_ code: Code, _ message: String, pusherCode: Int? = nil, channel: String? = nil) {
        self.code = code
        self.message = message
        self.pusherCode = pusherCode
        self.channel = channel
    }

    public var description: String {
        var text = message
        if let pusherCode { text += " (code \(pusherCode))" }
        return text
    }

    /// `pusher:error` from the server (docs/pusher-protocol.md §1; code may be absent).
    public static func serverError(message: String, code: Int?) -> PusherError {
        PusherError(.serverError, message, pusherCode: code)
    }
    /// The server closed with a 4000–4099 code: the configuration is refused.
    public static func connectionRefused(closeCode: Int, reason: String) -> PusherError {
        PusherError(.connectionRefused, "server refused the connection: \(reason)", pusherCode: closeCode)
    }
    /// `reconnectAttemptsMax` reached.
    public static func gaveUp(attempts: Int) -> PusherError {
        PusherError(.gaveUp, "gave up reconnecting after \(attempts) attempts")
    }
    /// `pusher:subscription_error` or a `pusher:error` attributed to a subscription.
    public static func subscriptionFailed(channel: String, message: String, code: Int? = nil) -> PusherError {
        PusherError(.subscriptionFailed, "subscription to \(channel) failed: \(message)", pusherCode: code, channel: channel)
    }
    /// The authorizer (endpoint, builder, closure, inline signer) failed.
    public static func authorizationFailed(channel: String, message: String) -> PusherError {
        PusherError(.authorizationFailed, "authorization for \(channel) failed: \(message)", channel: channel)
    }
    /// An encrypted event could not be decrypted even with a refetched key.
    public static func decryptionFailed(channel: String, event: String) -> PusherError {
        PusherError(.decryptionFailed, "could not decrypt event \(event) on \(channel)", channel: channel)
    }
    /// A client event was refused before sending, or by the server (4301).
    public static func clientEventRejected(channel: String?, message: String, code: Int? = nil) -> PusherError {
        PusherError(.clientEventRejected, "client event rejected: \(message)", pusherCode: code, channel: channel)
    }
    /// A frame from the server could not be understood.
    public static func malformedFrame(_ message: String) -> PusherError {
        PusherError(.malformedFrame, "malformed frame from server: \(message)")
    }
    /// Signing in as a user failed: the authenticator, the server, or a malformed answer.
    public static func signInFailed(_ message: String, code: Int? = nil) -> PusherError {
        PusherError(.signInFailed, "sign-in failed: \(message)", pusherCode: code)
    }
    /// An argument the application passed is invalid (channel name, event name, size).
    public static func invalidArgument(_ message: String, channel: String? = nil) -> PusherError {
        PusherError(.invalidArgument, message, channel: channel)
    }
    /// The operation needs a connection (and a subscribed channel).
    public static func notConnected(_ message: String, channel: String? = nil) -> PusherError {
        PusherError(.notConnected, message, channel: channel)
    }
    /// The WebSocket or TCP/TLS connection failed.
    public static func transport(_ message: String) -> PusherError {
        PusherError(.transport, "connection failed: \(message)")
    }

    /// Whether this is a subscription or authorization failure for a channel.
    public var isSubscriptionFailure: Bool { code == .subscriptionFailed || code == .authorizationFailed }
    /// Whether the server refused the connection with a 4000–4099 close code.
    public var isConnectionRefused: Bool { code == .connectionRefused }
    /// Whether reconnecting stopped because `maxAttempts` was reached.
    public var isGaveUp: Bool { code == .gaveUp }
    /// Whether a client event was refused (rate limit, wrong channel, …).
    public var isClientEventRejected: Bool { code == .clientEventRejected }
    /// Whether the WebSocket or TCP/TLS connection failed (``transport(_:)``).
    public var isTransportFailure: Bool { code == .transport }
    /// Whether signing in as a user failed (``signInFailed(_:code:)``).
    public var isSignInFailure: Bool { code == .signInFailed }
    /// Whether decrypting an encrypted event failed.
    public var isDecryptionFailure: Bool { code == .decryptionFailed }
}
