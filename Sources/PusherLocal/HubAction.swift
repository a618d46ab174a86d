import PusherProtocol

/// What the I/O owner must do after the hub took a decision.
public enum HubAction: Sendable, Equatable {
    /// Send one text frame to one connection.
    case send(ConnectionID, String)
    /// Send one encoded frame to many connections: a publish is encoded once, not once per
    /// subscriber.
    case deliver(String, to: [ConnectionID])
    /// Close one connection with a WebSocket close code (docs/pusher-protocol.md §1, "Close codes").
    case close(ConnectionID, code: UInt16, reason: String)
    /// Post a webhook event.
    case webhook(PusherWebhookEvent)
}
