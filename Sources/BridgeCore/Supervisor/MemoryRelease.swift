/// When a bridge hands the allocator's free pages back to the system (docs/architecture.md,
/// "Memory after a backlog"). Part of ``BridgeSupervisor``; the call itself is the runtime's.
///
/// A fault (an outage, a 403, a full disk) builds a backlog of thousands of messages; once it has
/// drained, glibc keeps most of the freed memory in its arenas, so the daemon's anonymous RSS stays
/// at the fault's peak and steps up at the first fault of each kind. After a backlog of at least
/// ``threshold`` messages has drained (to ``drained`` or fewer: under steady traffic some messages
/// are always on their way, so it is rarely exactly empty), the bridge asks for the free pages to go
/// back (`malloc_trim`), at most once per ``minimumInterval``. Small backlogs never trigger it.
public struct MemoryRelease: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// The smallest backlog (messages waiting in the bridge's outboxes) worth a release once drained.
    public static let threshold = 1_000
    /// A backlog of this many messages or fewer counts as drained (a second of steady traffic in
    /// flight, at the rates the soak runs).
    public static let drained = 100
    /// At most one release per bridge in this interval.
    public static let minimumInterval = Duration.seconds(10)

    /// The largest backlog seen since the last release.
    public private(set) var peakSinceRelease = 0
    private var lastRelease: Instant?

    public init() {}

    /// The bridge's backlog measured at `now` (about once a second): true when the free pages should
    /// be handed back now. A drained backlog that is rate-limited is released at a later measurement
    /// (as long as the backlog is still drained then).
    public mutating func measured(backlog: Int, now: Instant) -> Bool {
        peakSinceRelease = max(peakSinceRelease, backlog)
        guard backlog <= Self.drained, peakSinceRelease >= Self.threshold else { return false }
        if let lastRelease, now < lastRelease + Self.minimumInterval { return false }
        lastRelease = now
        peakSinceRelease = 0
        return true
    }
}
