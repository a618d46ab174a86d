/// What ``Spool/init(directory:configuration:logger:)`` found and did while recovering.
public struct SpoolRecoveryReport: Sendable, Equatable {
    /// Segment files found in the directory.
    public var segmentsFound = 0
    /// Records recovered as pending (not yet delivered).
    public var pendingRecords = 0
    /// The delivered watermark recovered: every record up to it counts as delivered.
    public var deliveredWatermark: UInt64 = 0
    /// The sequence the next append gets.
    public var nextSequence: UInt64 = 1
    /// Every damaged place, in file order; empty after a clean shutdown.
    public var damage: [SpoolDamage] = []
}
