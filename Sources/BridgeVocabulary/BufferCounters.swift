/// Running totals of a buffer since it was created, for metrics and logs (docs/contract.md §4: "every
/// drop is counted and logged").
public struct BufferCounters: Sendable, Equatable {
    /// Messages accepted.
    public var stored = 0
    /// Messages removed after delivery.
    public var removed = 0
    /// Buffered messages dropped to make room (drop-oldest).
    public var droppedOldest = 0
    /// Incoming messages dropped because the buffer was full (drop-newest).
    public var droppedNewest = 0
    /// Incoming messages dropped because they alone exceed `maxBytes` (either policy).
    public var droppedOversize = 0

    /// Totals with these values (all zero by default: nothing stored, removed or dropped yet).
    public init(stored: Int = 0, removed: Int = 0, droppedOldest: Int = 0, droppedNewest: Int = 0, droppedOversize: Int = 0) {
        self.stored = stored
        self.removed = removed
        self.droppedOldest = droppedOldest
        self.droppedNewest = droppedNewest
        self.droppedOversize = droppedOversize
    }

    /// Every drop, whatever the reason.
    public var dropped: Int { droppedOldest + droppedNewest + droppedOversize }
}
