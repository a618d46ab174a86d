/// Which connection of a bridge (the `side` label of the connection metrics).
public enum BridgeSide: String, Sendable, Hashable {
    /// The Pusher WebSocket connection.
    case pusher
    /// The MQTT broker connection.
    case mqtt
}
