/// What to do when a full buffer receives another message (docs/contract.md §4 `[bridge.buffer] overflow`, §7.6).
public enum BufferOverflowPolicy: String, Sendable, Equatable, CaseIterable {
    /// Make room by dropping the oldest buffered messages: the freshest data wins (dashboards).
    case dropOldest = "drop-oldest"
    /// Keep what is buffered and drop the incoming message: the earliest data wins (audit trails).
    case dropNewest = "drop-newest"
    /// Drop nothing: the producer waits for room. For MQTT → Pusher the bridge then stops reading
    /// from the broker, whose persistent session holds the rest (docs/contract.md §7.6).
    case backpressure
}
