import DequeModule

/// The exact merge of a bridge's N redundant Pusher connections (`[bridge.pusher] connections`,
/// 1 to 3; docs/pusher-merge.md), as a pure state machine: no I/O, no clock reads, no locks. The
/// daemon tells it every application event each connection delivers, and when a connection
/// becomes live on a channel (its `pusher_internal:subscription_succeeded`), loses it, or goes
/// down; for each event it answers ``Verdict/publish`` (publish it to MQTT now) or
/// ``Verdict/duplicate`` (another connection delivered it first: suppress it, count it as
/// `outcome="duplicate"`).
///
/// **How it decides.** Each channel keeps a log of the events it published, in the order they went
/// out, each with its ``PusherEventKey`` and the set of connections that delivered it. An event
/// from a connection is a copy of **the first entry with the same key that this connection has not
/// delivered yet** (at or after where it joined): it is suppressed and the entry marked as delivered
/// by it. With no such entry it is a new event: published at once and appended. So the first copy
/// always goes out at once (the latency is the fastest connection's), and two identical events the
/// app really sent twice are both published: each connection's first copy matches the first entry,
/// its second copy the second; nothing is dropped by content alone. The order published is the
/// order of first arrival, which is the channel's order for every pair of events that one
/// connection delivered first. A connection that publishes a new event skips nothing: entries
/// ahead of it that it has not delivered stay matchable (a faster connection that joined later may
/// have delivered a later event first). Once a connection delivered a copy of an entry published
/// at `t`, it no longer matches entries published before `t −` ``Limits/joinGrace``: connections
/// never disagree on the order of events further apart than that.
///
/// This rests on what Pusher guarantees one connection: a channel's events arrive in the order the
/// channel has them, each at most once, and none is missed while the subscription is in effect.
///
/// **A connection becoming live** (``connectionLive(_:channel:now:)``) may match:
/// - nothing already logged when no other connection is live on the channel: every event it then
///   delivers is new (the others' last events were all delivered before the channel's gap began);
/// - otherwise the entries published less than ``Limits/joinGrace`` before `now`, and everything
///   after: a copy it delivers of one of those is suppressed. If the event was in fact a second
///   identical event the app sent just after the subscription took effect, the connections that
///   are still live deliver it too, as an entry they have not delivered, and publish it then
///   (later by their lag; lost only if they all go down first). Such suppressions are counted
///   (``Counters/joinMatches``).
///
/// **Bounds.** An entry stays in the log for ``Limits/window`` after it was published, and a
/// channel keeps at most ``Limits/maxEntries``; an entry every live connection has delivered (or
/// may not match) leaves after ``Limits/joinGrace``. Past the window nothing can match: a copy
/// arriving later than the window after its first copy is published again (and logged like a new
/// event if the channel has room). Such copies are counted as ``Counters/lateCopies``, as well as
/// the merge can tell: an entry that leaves while a live connection has not delivered it is
/// counted as ``Counters/expiredUnmatched``, and that connection's next unmatched events, up to
/// that many, are taken for late copies. Entries pushed out by the count before their time are
/// counted as ``Counters/evictedByCount``. When the last connection loses a channel its log is
/// dropped. Besides the log, each live connection keeps an index by key of the entries it may
/// match (at most the log's size), so that an event costs the same whatever the log holds.
///
/// With one connection the merge is a pass-through: every event is published, no log is kept.
public struct PusherEventMerge: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// What to do with one delivered event.
    public enum Verdict: Sendable, Equatable {
        /// The first copy: publish it now.
        case publish
        /// A later copy of an event already published: suppress it (counted).
        case duplicate
        /// A copy of an event the bridge itself published on the channel (``ownEvent(channel:key:sentOn:now:)``):
        /// suppress it, like the echo of a single connection's own publish, which Pusher does not
        /// send back to the connection that published it.
        case ownEcho
        /// The first copy, from a connection that has just become live while another was live
        /// already (``Limits/joinHold``): held back until that other connection has caught up
        /// (its copy arrives), so that it goes out in the channel's order. The caller keeps the
        /// event and publishes it, with the channel's other held events, when ``takeReleased()``
        /// names the channel.
        case held
    }

    struct Entry: Sendable {
        var key: PusherEventKey
        var seq: UInt64
        var at: Instant
        /// Bit `c` set once connection `c` delivered it.
        var deliveredBy: UInt8
        /// The bridge published it itself: no connection's copy is ever published, and one that
        /// never arrives is not counted against that connection.
        var own = false
        /// Held back after a join (``Verdict/held``), not published yet.
        var held = false
    }

    /// A live connection's place in one channel's log.
    struct Cursor: Sendable {
        /// The sequence number of the first entry this connection may match.
        var floor: UInt64
        /// Entries published before this instant are no longer matched by this connection.
        var notBefore: Instant?
        /// The first sequence number published after it became live: a match below is a join match.
        var joinedAt: UInt64
        /// Entries that left the log before it delivered them, since its last match.
        var behind: UInt64 = 0
        /// Until when its first copies are held (``Limits/joinHold``): it became live beside
        /// another live connection and has matched nothing yet. Nil: not held.
        var probationEnds: Instant?

        /// Whether its first copies are held at `now`.
        func onProbation(at now: Instant) -> Bool { probationEnds.map { now < $0 } ?? false }
        /// By key, the sequence numbers of the entries it may match, in order: an index, so that an
        /// event costs the same whatever the log holds.
        var waiting: [PusherEventKey: Deque<UInt64>] = [:]

        /// Whether this connection may still match `entry` (`bit` is its own).
        func awaits(_ entry: Entry, bit: UInt8) -> Bool {
            entry.seq >= floor && entry.deliveredBy & bit == 0 && notBefore.map { entry.at >= $0 } ?? true
        }

        /// It delivered a copy of an entry first published at `at`: it is past every entry more
        /// than `grace` older (one it has not delivered by then it never will: connections never
        /// disagree on the order of events further apart than that).
        mutating func delivered(at: Instant, grace: Duration) {
            let limit = at - grace
            notBefore = max(notBefore ?? limit, limit)
        }
    }

    struct Channel: Sendable {
        var log: Deque<Entry> = []
        var nextSeq: UInt64 = 0
        var name = ""
        /// Entries held (``Verdict/held``), and when they go out at the latest.
        var heldCount = 0
        var holdDeadline: Instant?
        /// Indexed by connection; nil while that connection is not live on the channel.
        var cursors: [Cursor?]

        init(connections: Int) { cursors = Array(repeating: nil, count: connections) }

        var liveCount: Int { cursors.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
    }

    /// How many connections feed the merge (1 to 3).
    public let connections: Int
    public let limits: Limits
    public internal(set) var counters = Counters()
    var channels: [String: Channel] = [:]
    /// Channels whose held entries were released, for ``takeReleased()``.
    var released: [String] = []

    /// A merge of `connections` connections (clamped to 1…3) within `limits`.
    public init(connections: Int, limits: Limits = .default) {
        self.connections = min(max(connections, 1), 3)
        self.limits = limits
    }

    // MARK: Events

    /// Connection `connection` delivered an event with `key` on `channel` at `now`.
    public mutating func event(connection: Int, channel: String, key: PusherEventKey, now: Instant) -> Verdict {
        guard connections > 1 else {
            counters.published &+= 1
            return .publish
        }
        guard connection >= 0, connection < connections else { return .publish }
        var state = channels.removeValue(forKey: channel) ?? Channel(connections: connections)
        state.name = channel
        if state.cursors[connection] == nil { becomeLive(connection, &state, now: now) }
        expire(&state, now: now)
        releaseIfDue(&state, now: now)
        let verdict = decide(connection, key: key, &state, now: now)
        channels[channel] = state
        return verdict
    }

    /// The bridge itself published an event with `key` on `channel` at `now` — through the HTTP API
    /// with connection `sentOn`'s `socket_id` excluded, or as a client event sent on it (nil: no
    /// connection excluded). Pusher sends it to every other connection live on the channel; their
    /// copies are suppressed as ``Verdict/ownEcho``. Call it before the publish goes out: a copy can
    /// arrive before the publish returns. Nothing is kept when no other connection is live there.
    public mutating func ownEvent(channel: String, key: PusherEventKey, sentOn: Int?, now: Instant) {
        guard connections > 1, var state = channels.removeValue(forKey: channel) else { return }
        defer { channels[channel] = state }
        let bit = sentOn.map { UInt8(1) << UInt8(min(max($0, 0), 7)) } ?? 0
        let receivers = state.cursors.indices.filter { state.cursors[$0] != nil && UInt8(1) << UInt8($0) != bit }
        guard !receivers.isEmpty else { return }
        expire(&state, now: now)
        let seq = state.nextSeq
        state.log.append(Entry(key: key, seq: seq, at: now, deliveredBy: bit, own: true))
        state.nextSeq += 1
        for other in receivers { state.cursors[other]!.waiting[key, default: []].append(seq) }
        while state.log.count > limits.maxEntries {
            let entry = removeFirst(&state)
            if now < entry.at + limits.window { counters.evictedByCount &+= 1 }
        }
    }

    /// Connection `connection`'s subscription to `channel` took effect at `now` (its
    /// `pusher_internal:subscription_succeeded`): its cursor starts by the join rule. Nothing
    /// changes if it is live there already (call ``connectionLost(_:channel:)`` or
    /// ``connectionDown(_:)`` first when it lost the channel).
    public mutating func connectionLive(_ connection: Int, channel: String, now: Instant) {
        guard connections > 1, connection >= 0, connection < connections else { return }
        var state = channels.removeValue(forKey: channel) ?? Channel(connections: connections)
        state.name = channel
        expire(&state, now: now)
        if state.cursors[connection] == nil { becomeLive(connection, &state, now: now) }
        channels[channel] = state
    }

    /// Connection `connection` no longer holds `channel` (unsubscribed, refused, or the connection
    /// is going down). The channel's log is dropped when no connection is live on it any more.
    public mutating func connectionLost(_ connection: Int, channel: String) {
        guard connections > 1, connection >= 0, connection < connections, var state = channels.removeValue(forKey: channel)
        else { return }
        state.cursors[connection] = nil
        // Held entries wait for an established connection's copies: with none left, they go out.
        if state.heldCount > 0, !state.cursors.contains(where: { $0.map { $0.probationEnds == nil } ?? false }) {
            release(&state)
        }
        if state.liveCount > 0 { channels[channel] = state }
    }

    /// Connection `connection` went down: it holds no channel any more.
    public mutating func connectionDown(_ connection: Int) {
        guard connections > 1 else { return }
        for channel in Array(channels.keys) { connectionLost(connection, channel: channel) }
    }

    /// The bridge left `channel` on every connection: everything about it is forgotten, so a
    /// re-join starts afresh.
    public mutating func channelLeft(_ channel: String) {
        if var state = channels.removeValue(forKey: channel), state.heldCount > 0 { release(&state) }
    }

    /// Drops every entry past its time at `now`, on every channel (a timer the daemon may run so
    /// that quiet channels give their entries back; events expire entries of their channel anyway).
    public mutating func expire(now: Instant) {
        for channel in Array(channels.keys) {
            guard var state = channels.removeValue(forKey: channel) else { continue }
            expire(&state, now: now)
            releaseIfDue(&state, now: now)
            channels[channel] = state
        }
    }

    // MARK: Inspection

    /// The connections live on `channel`, in order.
    public func liveConnections(on channel: String) -> [Int] {
        guard let state = channels[channel] else { return [] }
        return state.cursors.indices.filter { state.cursors[$0] != nil }
    }

    /// Entries kept for `channel` (its memory).
    public func entryCount(on channel: String) -> Int { channels[channel]?.log.count ?? 0 }

    /// Entries kept over all channels.
    public var entryCount: Int { channels.values.reduce(0) { $0 + $1.log.count } }

    // MARK: The rules

    private mutating func becomeLive(_ connection: Int, _ state: inout Channel, now: Instant) {
        let othersLive = state.cursors.indices.contains { $0 != connection && state.cursors[$0] != nil }
        var floor = state.nextSeq
        if othersLive, let first = state.log.first(where: { now < $0.at + limits.joinGrace }) {
            floor = first.seq
        }
        var cursor = Cursor(floor: floor, joinedAt: state.nextSeq)
        if othersLive, limits.joinHold > .zero { cursor.probationEnds = now + limits.joinHold }
        let bit = UInt8(1) << UInt8(connection)
        for entry in state.log where cursor.awaits(entry, bit: bit) {
            cursor.waiting[entry.key, default: []].append(entry.seq)
        }
        state.cursors[connection] = cursor
    }

    private mutating func decide(_ connection: Int, key: PusherEventKey, _ state: inout Channel, now: Instant) -> Verdict {
        guard var cursor = state.cursors[connection] else { return .publish }
        state.cursors[connection] = nil  // moved out while it changes (no copy of its index)
        let bit = UInt8(1) << UInt8(connection)
        if let match = Self.firstAwaited(key, by: &cursor, bit: bit, in: state.log) {
            state.log[match].deliveredBy |= bit
            let entry = state.log[match]
            // It matched: it is in step (or behind). A match of a held entry means the connection it
            // waited for has caught up: the held entries go out now, in order.
            cursor.probationEnds = nil
            if entry.held { release(&state) }
            if entry.seq < cursor.joinedAt { counters.joinMatches &+= 1 }
            cursor.delivered(at: entry.at, grace: limits.joinGrace)
            cursor.behind = 0
            state.cursors[connection] = cursor
            if entry.own { counters.ownEchoes &+= 1 } else { counters.duplicates &+= 1 }
            dropDelivered(&state, now: now)
            return entry.own ? .ownEcho : .duplicate
        }
        if cursor.onProbation(at: now), cursor.behind == 0,
            state.cursors.contains(where: { $0.map { !$0.onProbation(at: now) } ?? false })
        {
            // Just live beside an established connection, and first with this event: the other
            // may not have delivered an earlier one yet (its task ran late). Held for its copy.
            let seq = state.nextSeq
            state.log.append(Entry(key: key, seq: seq, at: now, deliveredBy: bit, held: true))
            state.nextSeq += 1
            for other in state.cursors.indices where other != connection && state.cursors[other] != nil {
                state.cursors[other]!.waiting[key, default: []].append(seq)
            }
            state.heldCount += 1
            state.holdDeadline = state.holdDeadline ?? now + limits.joinHold
            counters.held &+= 1
            state.cursors[connection] = cursor
            return .held
        }
        if cursor.behind > 0 {
            // A copy of an entry that left the log (window, count) before this connection delivered
            // it: a connection delivers in the channel's order and misses nothing while subscribed,
            // so its next `behind` unmatched events are exactly those, already published. Suppressed.
            cursor.behind -= 1
            counters.lateCopies &+= 1
            counters.duplicates &+= 1
            state.cursors[connection] = cursor
            return .duplicate
        }
        counters.published &+= 1
        state.cursors[connection] = cursor
        let seq = state.nextSeq
        state.log.append(Entry(key: key, seq: seq, at: now, deliveredBy: bit))
        state.nextSeq += 1
        for other in state.cursors.indices where other != connection && state.cursors[other] != nil {
            state.cursors[other]!.waiting[key, default: []].append(seq)
        }
        while state.log.count > limits.maxEntries {
            let entry = removeFirst(&state)
            if now < entry.at + limits.window { counters.evictedByCount &+= 1 }
        }
        dropDelivered(&state, now: now)
        return .publish
    }

    /// The index in `log` of the first entry with `key` that `cursor`'s connection may match,
    /// taken off its index (with the stale ones before it).
    private static func firstAwaited(_ key: PusherEventKey, by cursor: inout Cursor, bit: UInt8, in log: Deque<Entry>) -> Int? {
        guard var seqs = cursor.waiting.removeValue(forKey: key) else { return nil }
        defer { if !seqs.isEmpty { cursor.waiting[key] = seqs } }
        let base = log.first?.seq ?? 0
        while let seq = seqs.popFirst() {
            guard seq >= base, seq - base < UInt64(log.count) else { continue }
            let index = Int(seq - base)
            if cursor.awaits(log[index], bit: bit) { return index }
        }
        return nil
    }

    /// Takes the oldest entry off the log and out of every index, counting it against the live
    /// connections that still awaited it.
    @discardableResult
    private mutating func removeFirst(_ state: inout Channel) -> Entry {
        // A held entry leaving (window, count) goes out first, with the others held.
        if state.log.first?.held == true { release(&state) }
        let entry = state.log.removeFirst()
        for index in state.cursors.indices {
            guard var cursor = state.cursors[index] else { continue }
            state.cursors[index] = nil
            if cursor.waiting[entry.key]?.first == entry.seq {
                cursor.waiting[entry.key]!.removeFirst()
                if cursor.waiting[entry.key]!.isEmpty { cursor.waiting[entry.key] = nil }
            }
            if !entry.own, cursor.awaits(entry, bit: UInt8(1) << UInt8(index)) {
                cursor.behind += 1
                counters.expiredUnmatched &+= 1
            }
            state.cursors[index] = cursor
        }
        return entry
    }

    /// Entries past the window leave (counted against the live connections that still awaited
    /// them), then those no live connection awaits any more, once older than the join grace.
    private mutating func expire(_ state: inout Channel, now: Instant) {
        while let first = state.log.first, now >= first.at + limits.window {
            removeFirst(&state)
        }
        dropDelivered(&state, now: now)
    }

    private mutating func dropDelivered(_ state: inout Channel, now: Instant) {
        while let first = state.log.first, now >= first.at + limits.joinGrace,
            !state.cursors.indices.contains(where: { state.cursors[$0]?.awaits(first, bit: UInt8(1) << UInt8($0)) ?? false })
        {
            removeFirst(&state)
        }
    }
}
