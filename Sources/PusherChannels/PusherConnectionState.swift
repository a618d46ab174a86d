import PusherProtocol

/// The connection states PusherSwift users know.
public enum PusherConnectionState: String, Sendable, Hashable, CustomStringConvertible {
    /// Opening the WebSocket and waiting for `pusher:connection_established`.
    case connecting
    /// Established: a `socket_id` is known and subscriptions are (re)sent.
    case connected
    /// Closing at the application's request.
    case disconnecting
    /// Not connected and not trying to (initial state, after `disconnect()`, or after giving up).
    case disconnected
    /// Lost the connection; waiting for the backoff delay before the next attempt.
    case reconnecting

    public var description: String { rawValue }
}
