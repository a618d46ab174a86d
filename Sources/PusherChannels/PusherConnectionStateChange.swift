import PusherProtocol

/// A connection state transition, with the `socket_id` when connected.
public struct PusherConnectionStateChange: Sendable, Hashable {
    /// The state before.
    public var previous: PusherConnectionState
    /// The state now.
    public var current: PusherConnectionState
    /// The socket id of the new connection when `current == .connected`.
    public var socketID: String?

    /// A transition from its parts.
    public init(previous: PusherConnectionState, current: PusherConnectionState, socketID: String? = nil) {
        self.previous = previous
        self.current = current
        self.socketID = socketID
    }
}
