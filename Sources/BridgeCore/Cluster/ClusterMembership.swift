/// One member's view of its cluster (docs/contract.md §7.4) and the Pusher channels it holds: a
/// pure state machine (docs/style.md §1) — no I/O, no clock reads. Each event takes `now:` and
/// returns ``ClusterAction``s; the executor calls ``tick(now:)`` at ``nextDeadline`` at the latest.
///
/// Rules (the design is in docs/architecture.md, "Clusters"):
/// - A remote member is *live* while its retained record exists and its last heartbeat is younger
///   than `member_timeout`; a hung member (SIGSTOP) whose record stays is dead after that timeout.
/// - Each wanted channel belongs to the live member with the highest ``RendezvousHash`` score. A
///   member that becomes live while this one is active counts only after `join_settle`, so a flapping
///   member moves nothing; a member that dies stops counting at once.
/// - Taking over subscribes at once; handing over keeps the channel until the new holder's known
///   held set lists it, or `handover_timeout` (5 s) passes: duplicates are bounded, gaps avoided.
/// - Held sets travel as snapshots and deltas with sequence numbers (``ClusterHeldReport``); a
///   hole makes a member's set unknown until its next snapshot (``ClusterHeldView``), which is
///   asked for (``ClusterSnapshotRequest``) and also sent every ``snapshotHeartbeats`` heartbeats.
/// - Losing the broker releases every channel (this member can no longer see the membership);
///   after a (re)connect it listens for ``ClusterMembership/observation`` before taking any.
public struct ClusterMembership: Sendable {
    /// Where this member is in its life.
    public enum Phase: Sendable, Equatable {
        /// Not connected to the broker: holds nothing.
        case disconnected
        /// Connected, listening for the other members' heartbeats until the instant; holds nothing yet.
        case observing(until: ContinuousClock.Instant)
        /// A member: holds the channels the hashing gives it.
        case active
        /// `leaveRequested`: record deleted, handing every channel over.
        case leaving
        /// Left the group: holds nothing, does nothing more.
        case left
    }

    /// What this member knows of another.
    struct RemoteMember: Sendable {
        var record: ClusterMemberRecord?
        var lastHeartbeat: ContinuousClock.Instant?
        /// Whether its last heartbeat said it is not active yet (listening after a connect).
        var observing = false
        /// When anything of it last arrived (its record, a heartbeat, a held report).
        var lastHeard: ContinuousClock.Instant?
        /// Set while live: when it became live, and from when it counts for ownership.
        var liveSince: ContinuousClock.Instant?
        var settledAt: ContinuousClock.Instant?
        /// Whether `settledAt` is still ahead (a deadline to wake up for).
        var awaitingSettle = false
        var held: ClusterHeldView?
        /// When this member last asked it for a snapshot.
        var snapshotAskedAt: ContinuousClock.Instant?

        /// The channels its current incarnation is known to hold (empty while unknown).
        var confirmedHeld: Set<String> {
            guard let held, held.known, let record, held.incarnation == record.incarnation else { return [] }
            return held.channels
        }

        /// The channels its current incarnation was last known to hold, even if a message was lost since.
        var lastKnownHeld: Set<String> {
            guard let held, record.map({ $0.incarnation == held.incarnation }) ?? true else { return [] }
            return held.channels
        }
    }

    /// A channel handed over but still held: until when, and to whom (in the ownership of `owning`).
    struct Release: Sendable {
        var deadline: ContinuousClock.Instant
        var newOwner: String?
    }

    /// The `[bridge.cluster]` settings.
    public let settings: ClusterSettings
    /// This process's incarnation (random, chosen by the executor at start).
    public let incarnation: String
    /// This process's start, milliseconds since 1970, for its record.
    public let startedAt: Int64
    /// Where this member is.
    public internal(set) var phase: Phase = .disconnected
    /// This process's MQTT client id, written into its record (set by the executor before it connects).
    public var clientID: String?

    /// How long a change of the held set waits before it is reported, so that taking 3,000 channels
    /// sends a few messages, not 3,000 (the supervisor sets 50 ms; zero: at once).
    public var heldReportDelay: Duration = .zero
    /// A full held snapshot goes out every this many heartbeats (10 min by default) even when nothing
    /// was lost: a safety net only, as holes are found by the sequence numbers and the heartbeats;
    /// at 1,000,000 channels over 50 members each snapshot is ~340 KB (cluster-bench).
    public static let snapshotHeartbeats = 600

    var members: [String: RemoteMember] = [:]
    var wanted: Set<String> = []
    /// Counts the changes of ``wanted``: the owned channels are computed again after one.
    var wantedRevision = 0
    /// The channels this member owns, and what they were computed from (active, owning members, wanted revision).
    var target: Set<String> = []
    var targetKey: (active: Bool, owning: [String], wantedRevision: Int)?
    /// Set when the target or the subscriptions changed: channels to take and hand over are sought again.
    var ownershipDirty = true
    /// Set when what decides a handover may have changed (a held set, the ownership, the wanted channels).
    var releaseCheckNeeded = true
    /// Channels subscribed (asked of Pusher), and of those the ones Pusher confirmed.
    var subscribed: Set<String> = []
    var confirmed: Set<String> = [] { didSet { heldDirty = true } }
    /// Channels handed over but still held, with the instant they are dropped regardless.
    var releasing: [String: Release] = [:]
    /// The earliest deadline in ``releasing``.
    var releaseDeadline: ContinuousClock.Instant?
    /// Channels whose new holder reported them, kept until the instant (``ClusterSettings/handoverLinger``).
    var lingering: [String: ContinuousClock.Instant] = [:]
    /// The held set as the others know it from this member's messages, its last sequence number,
    /// the `socket_id` sent, and whether the next message must be a full snapshot.
    var reportedHeld: Set<String> = []
    var reportedSocketID: String?
    var heldSequence: UInt64 = 0
    var snapshotNeeded = true
    var heldDirty = false
    /// When the pending held messages go out; when a snapshot asked for by another member does.
    var heldDue: ContinuousClock.Instant?
    var askedSnapshotDue: ContinuousClock.Instant?
    var lastSnapshotAt: ContinuousClock.Instant?
    var heartbeatsSinceSnapshot = 0
    /// Channels whose holder died without handing them over, with when it was last heard from;
    /// and channels a member leaving on SIGTERM is handing over. Each until this member takes the
    /// channel, another reports it, or it is no longer wanted (``ClusterTakeover``).
    var orphaned: [String: ContinuousClock.Instant] = [:]
    var handedOverByLeaver: Set<String> = []
    /// This member's Pusher `socket_id` while connected, sent with its held reports.
    var pusherSocketID: String?
    /// Why this member gave up its broker connection (another process took its MQTT session).
    var gaveWay: String?
    var nextHeartbeat: ContinuousClock.Instant?
    var heartbeatSequence: UInt64 = 0
    /// Whether the last record seen on this member's own topic is its own.
    var ownRecordCurrent = false
    /// After a connect, until this member's own record comes back: the broker sends it after
    /// everything it had queued for this member (a kept session's backlog, then the retained records
    /// the new subscription asks for), so until then this member may not have heard of the others,
    /// and its observation goes on (at most ``echoWait`` past its end), then runs a whole
    /// ``observation`` from the echo, for the others' heartbeats behind it. Without this, a member back
    /// with a session whose backlog took longer to read than the observation counted itself alone
    /// and took every channel (100,000 at once in the fleet bench).
    var awaitingOwnRecord = false
    /// After the echo, while some member is known by its record but not live: how long this one
    /// waits for their heartbeats (one observation).
    var heartbeatWait: ContinuousClock.Instant?
    var duplicateUntil: ContinuousClock.Instant?
    var duplicateIncarnation: String?
    var lastTick: ContinuousClock.Instant?

    public init(settings: ClusterSettings, incarnation: String, startedAt: Int64) {
        self.settings = settings
        self.incarnation = incarnation
        self.startedAt = startedAt
    }

    /// This member's name.
    public var instance: String { settings.instance }

    /// How long a member listens after a (re)connect before it takes channels: `join_settle`, but
    /// at least two heartbeat intervals so that every live member has been heard from.
    public var observation: Duration { max(settings.joinSettle, settings.heartbeatInterval * 2) }

    /// How long past its end an observation waits for this member's own record to come back.
    public var echoWait: Duration { settings.memberTimeout * 3 }

    /// When the observation that runs `until` ends: then, or once the own record is back.
    func observationEnd(_ until: ContinuousClock.Instant) -> ContinuousClock.Instant {
        if awaitingOwnRecord { return until + echoWait }
        if let heartbeatWait, recordedNotLive { return max(until, heartbeatWait) }
        return until
    }

    /// Whether a member is known by its record but not live (no heartbeat heard yet).
    var recordedNotLive: Bool { members.values.contains { $0.record != nil && $0.liveSince == nil } }

    /// The channels this member is subscribed to (including those being handed over).
    public var heldChannels: Set<String> { subscribed }

    /// Whether another live process uses this instance name: `/readyz` reports it (an operator must act).
    public var isDuplicateInstance: Bool { duplicateUntil != nil }

    /// Why this member is not ready, for `/readyz` and `STATUS=` (docs/contract.md §5.7): a
    /// duplicate instance name, or no membership yet; nil when it takes part normally.
    public var readinessProblem: String? {
        if let gaveWay { return gaveWay }
        if let other = duplicateIncarnation, isDuplicateInstance {
            return "cluster instance \(instance) is also used by another live process (incarnation \(other)); "
                + "give each member its own instance"
        }
        switch phase {
        case .active: return nil
        case .disconnected: return "cluster membership needs the broker"
        case .observing: return "cluster: listening for the other members before taking channels"
        case .leaving, .left: return "cluster: leaving the group"
        }
    }

    /// The members that count for ownership now, this one included while active, sorted.
    public func owningMembers(now: ContinuousClock.Instant) -> [String] {
        var names = members.compactMap { name, member in
            member.settledAt.flatMap { $0 <= now ? name : nil }
        }
        if phase == .active { names.append(instance) }
        return names.sorted()
    }

    /// The owning members that are sending, for `mqtt_to_pusher = "partition"` (``ClusterPartition``):
    /// ``owningMembers(now:)`` without those whose last heartbeat said they still listen after a
    /// connect. A member that lost the broker and came back before `member_timeout` (its session
    /// lost with a broker node) missed what was published meanwhile; while it listens, the others
    /// send its channels, replaying what they kept.
    public func sendingMembers(now: ContinuousClock.Instant) -> [String] {
        owningMembers(now: now).filter { $0 == instance || members[$0]?.observing != true }
    }

    /// The live members other than this one, sorted (settled or not).
    public var liveMembers: [String] { members.compactMap { $0.value.liveSince == nil ? nil : $0.key }.sorted() }

    /// The member that owns `channel` in this member's current view.
    public func owner(of channel: String, now: ContinuousClock.Instant) -> String? {
        RendezvousHash.owner(of: RendezvousHash.channelKey(channel), among: owningMembers(now: now))
    }

    /// Whether this member runs the channel discovery of prefix rule `rule` (docs/contract.md §7.1:
    /// once per group, on the member the hashing assigns to the rule).
    public func isDiscoveryOwner(rule: String, now: ContinuousClock.Instant) -> Bool {
        phase == .active && RendezvousHash.owner(of: RendezvousHash.discoveryKey(rule: rule), among: owningMembers(now: now)) == instance
    }

    /// The Pusher `socket_id` of the member holding `channel`, when another member holds it and
    /// reported one: an event this member sends to the channel names it, so that Pusher does not
    /// deliver it to the holder, which would publish it to MQTT again (docs/contract.md §7.4, "loops").
    /// Nil when this member holds the channel (its own `socket_id` applies) or nothing is known.
    public func holderSocketID(of channel: String, now: ContinuousClock.Instant) -> String? {
        guard let owner = owner(of: channel, now: now), owner != instance, let member = members[owner],
            let held = member.held, let record = member.record, held.incarnation == record.incarnation
        else { return nil }
        return held.socketID
    }

    /// The earliest instant ``tick(now:)`` has something to do; nil when nothing is timed.
    public var nextDeadline: ContinuousClock.Instant? {
        var deadlines: [ContinuousClock.Instant] = []
        if let nextHeartbeat { deadlines.append(nextHeartbeat) }
        if case .observing(let until) = phase { deadlines.append(observationEnd(until)) }
        if let duplicateUntil { deadlines.append(duplicateUntil) }
        if let releaseDeadline { deadlines.append(releaseDeadline) }
        if let heldDue { deadlines.append(heldDue) }
        if let askedSnapshotDue { deadlines.append(askedSnapshotDue) }
        for member in members.values where member.liveSince != nil {
            if let last = member.lastHeartbeat { deadlines.append(last + settings.memberTimeout) }
            if member.awaitingSettle, let settledAt = member.settledAt { deadlines.append(settledAt) }
        }
        return deadlines.min()
    }
}
