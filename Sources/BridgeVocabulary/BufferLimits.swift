/// The bounds of one direction's buffer (docs/contract.md §4 `[bridge.buffer] max_messages`, `max_bytes`).
public struct BufferLimits: Sendable, Equatable {
    /// Most messages held at once; at least 1.
    public var maxMessages: Int
    /// Most bytes held at once (sum of the messages' byte counts).
    public var maxBytes: Int

    /// Bounds with these values; values below 1 (messages) or 0 (bytes) are raised to them.
    public init(maxMessages: Int, maxBytes: Int) {
        self.maxMessages = max(1, maxMessages)
        self.maxBytes = max(0, maxBytes)
    }
}
