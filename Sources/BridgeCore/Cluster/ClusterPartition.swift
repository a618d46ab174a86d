/// MQTT → Pusher in a cluster without shared subscriptions (`[bridge.cluster] mqtt_to_pusher =
/// "partition"`, docs/contract.md §8.4): every member subscribes the rules' filters itself, so every
/// member receives every message, and a member sends a message to Pusher only when it owns the
/// message's rendered channel — the rendezvous hashing of the membership (``RendezvousHash``), the
/// same owner every member computes for that channel's Pusher → MQTT side. A pure value: no I/O, no
/// clock reads; the executor feeds it the owning members after each change and every routed message.
///
/// The handover rule (duplicates preferred to loss, both bounded):
/// - **Linger.** A member keeps sending a channel's messages for `linger` after it stopped owning
///   it, so that a channel moving to a member that takes it a little later has no gap.
/// - **Standby.** A message for a channel this member does not send is kept for `standbyWindow`
///   (at most `standbyLimit` messages, the oldest evicted first). When a channel becomes this
///   member's — a member died (SIGKILL, a hung host), one left, or this one joined — the kept
///   messages of that channel are sent first, in the order they arrived, then the live ones: what
///   the previous owner received but may not have sent before it died is sent again. Those that
///   the previous owner did send arrive twice (counted by the executor as replayed).
/// - A kept message whose window passes unsent was another member's to send: its outcome is
///   `elsewhere` (`expired`).
///
/// Order per channel holds across the cluster while one member sends a channel; during a move the
/// two members' streams overlap (duplicates), each in order.
public struct ClusterPartition<Message: Sendable>: Sendable {
    /// A message this member keeps because another member sends its channel.
    struct Kept: Sendable {
        var channel: String
        var message: Message
        var at: ContinuousClock.Instant
    }

    /// This member's instance name.
    public let instance: String
    /// How long a message for another member's channel is kept to be sent if its channel moves here.
    public let standbyWindow: Duration
    /// How long this member keeps sending a channel it stopped owning.
    public let linger: Duration
    /// The most messages kept at once.
    public let standbyLimit: Int

    /// The owning members now (sorted, this member included while it is active).
    public private(set) var owners: [String] = []
    /// Earlier owner lists, each with the instant it stops counting (`linger` after it was replaced).
    var earlier: [(owners: [String], until: ContinuousClock.Instant)] = []
    /// The kept messages, oldest first.
    var kept: [Kept] = []
    /// Where `kept` starts: removed entries before it are compacted away in bulk.
    var keptStart = 0

    public init(instance: String, standbyWindow: Duration, linger: Duration, standbyLimit: Int) {
        self.instance = instance
        self.standbyWindow = standbyWindow
        self.linger = linger
        self.standbyLimit = max(1, standbyLimit)
    }

    /// The defaults for a cluster's settings: kept for `member_timeout + handover timeout` (a hung
    /// member is declared dead after `member_timeout`; the rest covers what it received and had not
    /// sent), lingering for the handover timeout.
    public init(settings: ClusterSettings, standbyLimit: Int) {
        self.init(
            instance: settings.instance, standbyWindow: settings.memberTimeout + settings.handoverTimeout,
            linger: settings.handoverTimeout, standbyLimit: standbyLimit)
    }

    /// How many messages are kept now (the `buffered` of the counter identity).
    public var keptCount: Int { kept.count - keptStart }

    /// Whether this member sends `channel`'s messages now: it owns the channel, or owned it in a
    /// view replaced less than `linger` ago.
    public func sends(_ channel: String, now: ContinuousClock.Instant) -> Bool {
        let key = RendezvousHash.channelKey(channel)
        if RendezvousHash.owner(of: key, among: owners) == instance { return true }
        for view in earlier where view.until > now {
            if RendezvousHash.owner(of: key, among: view.owners) == instance { return true }
        }
        return false
    }

    /// A routed message for `channel`: true when this member sends it now; false when it is kept.
    /// `expired` receives those whose window passed (their outcome: `elsewhere`); `evicted` counts
    /// the oldest dropped to stay within ``standbyLimit`` (also `elsewhere`).
    public mutating func take(
        _ message: Message, channel: String, now: ContinuousClock.Instant, expired: inout [Message]
    ) -> Bool {
        expire(now: now, into: &expired)
        if sends(channel, now: now) { return true }
        if keptCount >= standbyLimit {
            expired.append(kept[keptStart].message)
            keptStart += 1
        }
        kept.append(Kept(channel: channel, message: message, at: now))
        compact()
        return false
    }

    /// The owning members changed (the executor reads them from ``ClusterMembership/owningMembers(now:)``
    /// after each membership event): returns the kept messages of the channels that became this
    /// member's, oldest first, to be sent before anything newer. Nothing when the list is the same.
    public mutating func ownersChanged(
        to newOwners: [String], now: ContinuousClock.Instant, expired: inout [Message]
    ) -> [Message] {
        let sorted = newOwners.sorted()
        guard sorted != owners else { return [] }
        expire(now: now, into: &expired)
        earlier.removeAll { $0.until <= now }
        earlier.append((owners, now + linger))
        owners = sorted
        var replay: [Message] = []
        var stay: [Kept] = []
        for entry in kept[keptStart...] {
            if RendezvousHash.owner(of: RendezvousHash.channelKey(entry.channel), among: owners) == instance {
                replay.append(entry.message)
            } else {
                stay.append(entry)
            }
        }
        kept = stay
        keptStart = 0
        return replay
    }

    /// Drops the kept messages older than the window into `expired`.
    public mutating func expire(now: ContinuousClock.Instant, into expired: inout [Message]) {
        while keptStart < kept.count, kept[keptStart].at + standbyWindow <= now {
            expired.append(kept[keptStart].message)
            keptStart += 1
        }
        compact()
    }

    /// Removes the dropped prefix once it is half the storage (amortised O(1) per message).
    private mutating func compact() {
        if keptStart > 1024 && keptStart * 2 > kept.count {
            kept.removeFirst(keptStart)
            keptStart = 0
        }
    }
}
