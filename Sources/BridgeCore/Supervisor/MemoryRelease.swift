/// When a bridge hands the allocator's free pages back to the system (docs/architecture.md,
/// "Memory after a backlog"). Part of ``BridgeSupervisor``; the call itself is the runtime's.
///
/// A fault (an outage, a 403, a full disk) builds a backlog of thousands of messages; once it has
/// drained, glibc keeps most of the freed memory in its arenas, so the daemon's anonymous RSS stays
/// at the fault's peak and steps up at the first fault of each kind. After a backlog of at least
/// ``threshold`` messages or ``thresholdBytes`` has drained (to ``drained`` messages and
/// ``drainedBytes`` or fewer: under steady traffic some are always on their way, so it is rarely
/// exactly empty), the bridge asks for the free pages to go back (`malloc_trim`), at most once per
/// ``minimumInterval``. Small backlogs never trigger it. The backlog is measured about once a second, so a burst that fills and drains
/// between two measurements is not seen.
public struct MemoryRelease: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// The smallest backlog (messages waiting in the bridge's outboxes) worth a release once drained.
    public static let threshold = 1_000
    /// The smallest backlog in bytes worth a release once drained (fewer, larger messages).
    public static let thresholdBytes = 4 << 20
    /// A backlog of this many messages or fewer counts as drained (a second of steady traffic in
    /// flight, at the rates the soak runs).
    public static let drained = 100
    /// … and of this many bytes or fewer.
    public static let drainedBytes = 1 << 20
    /// At most one release per bridge in this interval.
    public static let minimumInterval = Duration.seconds(10)

    /// The largest backlog seen since the last release, in messages and in bytes.
    public private(set) var peakSinceRelease = 0
    public private(set) var peakBytesSinceRelease = 0
    private var lastRelease: Instant?

    public init() {}

    /// The bridge's backlog (messages, and their bytes) measured at `now` (about once a second): true when the free pages should
    /// be handed back now. A drained backlog that is rate-limited is released at a later measurement
    /// (as long as the backlog is still drained then).
    public mutating func measured(backlog: Int, bytes: Int = 0, now: Instant) -> Bool {
        peakSinceRelease = max(peakSinceRelease, backlog)
        peakBytesSinceRelease = max(peakBytesSinceRelease, bytes)
        let large = peakSinceRelease >= Self.threshold || peakBytesSinceRelease >= Self.thresholdBytes
        guard backlog <= Self.drained, bytes <= Self.drainedBytes, large else { return false }
        if let lastRelease, now < lastRelease + Self.minimumInterval { return false }
        lastRelease = now
        peakSinceRelease = 0
        peakBytesSinceRelease = 0
        return true
    }
}
