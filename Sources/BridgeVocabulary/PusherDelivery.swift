/// `via` of an MQTT → Pusher rule.
public enum PusherDelivery: String, Sendable, Equatable, CaseIterable {
    /// Signed HTTP API call (`POST /apps/ID/events`), default.
    case http
    /// A `client-*` event on the bridge's WebSocket (private-/presence- channels only).
    case clientEvent = "client-event"
}
