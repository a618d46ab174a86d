/// One place where recovery found damage, and what it did about it.
public struct SpoolDamage: Sendable, Equatable {
    /// What recovery did.
    public enum Repair: Sendable, Equatable {
        /// The damage was a torn last record (a write cut short by a crash): the segment was
        /// truncated at `offset`, discarding this many bytes. Nothing that `append` had
        /// returned for under the `always` policy can be lost this way.
        case truncatedTornTail(discardedBytes: Int)
        /// Damage in the middle of the log: the valid prefix was kept, the damaged file and every
        /// later segment were renamed to these paths (kept for inspection, never read again).
        case movedAside([String])
    }

    /// The segment file's path.
    public var file: String
    /// Offset in the file of the first byte not part of a valid record.
    public var offset: Int
    /// What was wrong there.
    public var reason: SpoolDamageReason
    /// What recovery did.
    public var repair: Repair
}
