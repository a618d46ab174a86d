import Durability

/// What happened to a message offered to an ``Outbox``.
struct OutboxAdmission: Sendable, Equatable {
    /// Equal when the counters see the same: the sequence is where, not what, happened.
    static func == (lhs: OutboxAdmission, rhs: OutboxAdmission) -> Bool {
        lhs.dropped == rhs.dropped && lhs.spoolFailed == rhs.spoolFailed
    }

    /// Messages dropped by the overflow policy (the offered one included, for drop-newest).
    var dropped = 0
    /// The spool refused the message (closed, or over its payload limit): it was not stored. A full
    /// or failing disk is not this: the spool degrades and the message waits in memory.
    var spoolFailed = false
    /// The sequence the message was stored under (nil when it was not stored).
    var sequence: UInt64?

    init(dropped: Int = 0, spoolFailed: Bool = false, sequence: UInt64? = nil) {
        self.dropped = dropped
        self.spoolFailed = spoolFailed
        self.sequence = sequence
    }

    /// What the backlog's decision means for the counters.
    init(_ admission: BacklogAdmission) {
        switch admission {
        case .stored(let sequence): self.init(sequence: sequence)
        case .storedDroppingOldest(let sequence, let dropped): self.init(dropped: dropped.count, sequence: sequence)
        case .droppedNewest, .droppedOversize: self.init(dropped: 1)
        }
    }
}
