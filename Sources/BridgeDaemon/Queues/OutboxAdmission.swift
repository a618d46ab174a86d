import Durability

/// What happened to a message offered to an ``Outbox``.
struct OutboxAdmission: Sendable, Equatable {
    /// Messages dropped by the overflow policy (the offered one included, for drop-newest).
    var dropped = 0
    /// The spool refused the message (closed, or over its payload limit): it was not stored. A full
    /// or failing disk is not this: the spool degrades and the message waits in memory.
    var spoolFailed = false

    init(dropped: Int = 0, spoolFailed: Bool = false) {
        self.dropped = dropped
        self.spoolFailed = spoolFailed
    }

    /// What the backlog's decision means for the counters.
    init(_ admission: BacklogAdmission) {
        switch admission {
        case .stored: self.init()
        case .storedDroppingOldest(_, let dropped): self.init(dropped: dropped.count)
        case .droppedNewest, .droppedOversize: self.init(dropped: 1)
        }
    }
}
