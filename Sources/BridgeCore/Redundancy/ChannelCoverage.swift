/// Which of a bridge's N Pusher connections are up and which hold each channel, and the gaps
/// between them (docs/pusher-merge.md, "Gap records"), as a pure state machine: no I/O, no clock
/// reads. The daemon tells it when a connection comes up or goes down and when a connection's
/// subscription to a channel takes effect or ends; it answers with ``PusherGap`` records to publish.
///
/// **Gaps.** A channel the bridge holds has a gap while no connection holds it: all connections
/// down, or between a reconnect and the first `subscription_succeeded` after it. The gap begins
/// when its last holder lets go and ends when a connection holds it again, which returns one
/// ``PusherGap`` (one per channel per gap; a second connection holding it ends nothing).
///
/// **Across restarts and takeovers.** ``lastHeld(now:)`` gives, per channel, when it was last held
/// (now, for one held now); the daemon keeps that in its state directory and passes it back to
/// ``init(connections:lastHeld:)``. A channel known from there has a gap from that time until this
/// process first holds it; a channel never held before has none. In a cluster the member that
/// takes a channel over passes its last holder's time to ``takenOver(_:lastHeldAt:)``. The time is
/// as fresh as the daemon wrote it: written every few seconds, the restart gap's `from` is early by
/// at most that period (a gap is over-reported, never hidden).
///
/// **Leaving on purpose** (``channelLeft(_:)``: discovery let it go, a reload removed it) is not a
/// gap: the channel is forgotten, dropped from ``lastHeld(now:)``, and a later join starts afresh.
///
/// **Readiness.** ``anyConnectionUp`` is what `/readyz` needs (200 while at least one connection of
/// the bridge is up), ``connectionUp`` what STATUS= and `pusher_mqtt_bridge_connection_up` show.
public struct ChannelCoverage: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// The time of an event on both clocks: the monotonic one measures gaps, the wall clock dates
    /// them.
    public struct Now: Sendable, Equatable {
        public var instant: Instant
        public var wall: UTCTimestamp

        public init(_ instant: Instant, wall: UTCTimestamp) {
            self.instant = instant
            self.wall = wall
        }
    }

    /// What the gaps reported add up to (the two gap metrics).
    public struct Counters: Sendable, Equatable {
        /// Gaps reported (`pusher_mqtt_bridge_pusher_gaps_total`).
        public var gaps: UInt64 = 0
        /// Their length, summed (`pusher_mqtt_bridge_pusher_gap_seconds_total`, in seconds ÷ 1000).
        public var gapMilliseconds: Int64 = 0
    }

    struct Channel: Sendable {
        /// Bit `c` set while connection `c` holds it.
        var holders: UInt8 = 0
        /// While no connection holds it: when it was last held (instant nil when that was in
        /// another process).
        var gapFrom: (wall: UTCTimestamp, instant: Instant?)?
    }

    /// How many connections the bridge has (1 to 3).
    public let connections: Int
    /// Per connection: whether it is up (connected, its `socket_id` known).
    public private(set) var connectionUp: [Bool]
    public private(set) var counters = Counters()
    var channels: [String: Channel] = [:]

    /// Coverage for `connections` connections (clamped to 1…3), none up, with the last-held times
    /// read from the state directory (`lastHeld`, as ``lastHeld(now:)`` gave them).
    public init(connections: Int, lastHeld: [String: UTCTimestamp] = [:]) {
        self.connections = min(max(connections, 1), 3)
        self.connectionUp = Array(repeating: false, count: self.connections)
        for (channel, wall) in lastHeld { channels[channel] = Channel(gapFrom: (wall, nil)) }
    }

    // MARK: Connections

    /// Connection `connection` is up (connected; it holds no channel until one succeeds).
    public mutating func connectionCameUp(_ connection: Int) {
        guard connectionUp.indices.contains(connection) else { return }
        connectionUp[connection] = true
    }

    /// Connection `connection` went down at `now`: it holds nothing any more. Returns the channels
    /// that lost their last holder (their gap begins now), in name order.
    @discardableResult
    public mutating func connectionWentDown(_ connection: Int, now: Now) -> [String] {
        guard connectionUp.indices.contains(connection) else { return [] }
        connectionUp[connection] = false
        var uncovered: [String] = []
        for channel in channels.keys.sorted() where release(channel, connection: connection, now: now) {
            uncovered.append(channel)
        }
        return uncovered
    }

    /// Whether at least one connection is up (`/readyz`).
    public var anyConnectionUp: Bool { connectionUp.contains(true) }

    // MARK: Channels

    /// Connection `connection`'s subscription to `channel` took effect at `now`. Returns the gap
    /// this ends, if the channel had one.
    public mutating func subscribed(_ channel: String, connection: Int, now: Now) -> PusherGap? {
        guard connectionUp.indices.contains(connection) else { return nil }
        let bit = UInt8(1) << UInt8(connection)
        var state = channels[channel] ?? Channel()
        defer { channels[channel] = state }
        let wasHeld = state.holders != 0
        state.holders |= bit
        guard !wasHeld, let from = state.gapFrom else { return nil }
        state.gapFrom = nil
        let milliseconds: Int64
        if let instant = from.instant {
            let components = instant.duration(to: now.instant).components
            milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        } else {
            milliseconds = now.wall.millisecondsSince1970 - from.wall.millisecondsSince1970
        }
        let gap = PusherGap(channel: channel, from: from.wall, to: now.wall, milliseconds: milliseconds)
        counters.gaps += 1
        counters.gapMilliseconds += gap.milliseconds
        return gap
    }

    /// Connection `connection` no longer holds `channel` (its subscription was refused or ended)
    /// at `now`. Returns whether the channel has no holder left (its gap begins now).
    @discardableResult
    public mutating func unsubscribed(_ channel: String, connection: Int, now: Now) -> Bool {
        guard connectionUp.indices.contains(connection) else { return false }
        return release(channel, connection: connection, now: now)
    }

    /// The bridge left `channel` on purpose: no gap; it is forgotten.
    public mutating func channelLeft(_ channel: String) {
        channels[channel] = nil
    }

    /// In a cluster, this member takes `channel` over from another member. `lastHeldAt`: when its
    /// holder, which died with it, was last heard from — the gap reported when it is held here runs
    /// from then (the later time wins if one is known already); nil: the holder hands it over and
    /// keeps it until then, so there is no gap, whatever this process's own restart record says.
    /// Ignored while a connection here holds it.
    public mutating func takenOver(_ channel: String, lastHeldAt: UTCTimestamp?) {
        var state = channels[channel] ?? Channel()
        guard state.holders == 0 else { return }
        guard let wall = lastHeldAt else {
            channels[channel] = nil
            return
        }
        if let known = state.gapFrom, known.wall >= wall { return }
        state.gapFrom = (wall, nil)
        channels[channel] = state
    }

    // MARK: Inspection

    /// The connections holding `channel`, in order.
    public func holders(of channel: String) -> [Int] {
        guard let holders = channels[channel]?.holders else { return [] }
        return (0..<connections).filter { holders & (UInt8(1) << UInt8($0)) != 0 }
    }

    /// The channels connection `connection` holds, in name order.
    public func channelsHeld(by connection: Int) -> [String] {
        guard connectionUp.indices.contains(connection) else { return [] }
        let bit = UInt8(1) << UInt8(connection)
        return channels.filter { $0.value.holders & bit != 0 }.keys.sorted()
    }

    /// Whether some connection holds `channel`.
    public func isHeld(_ channel: String) -> Bool { (channels[channel]?.holders ?? 0) != 0 }

    /// Whether connection `connection` is up and holds each of `channels` that the bridge still
    /// holds or has a gap on (one it left, or never held, does not count): what a reload replacing
    /// the connections waits for before it goes on to the next.
    public func connection(_ connection: Int, holdsAll wanted: some Sequence<String>) -> Bool {
        guard connectionUp.indices.contains(connection), connectionUp[connection] else { return false }
        let bit = UInt8(1) << UInt8(connection)
        return wanted.allSatisfy { channels[$0].map { $0.holders & bit != 0 } ?? true }
    }

    /// The channels in a gap now (known, held before, no holder), in name order.
    public var uncoveredChannels: [String] {
        channels.filter { $0.value.holders == 0 && $0.value.gapFrom != nil }.keys.sorted()
    }

    /// Per channel, when it was last held: `now` for a channel held now, else when its last holder
    /// let go (or the time it was known by). What the daemon writes to the state directory.
    public func lastHeld(now: Now) -> [String: UTCTimestamp] {
        var times: [String: UTCTimestamp] = [:]
        for (channel, state) in channels {
            if state.holders != 0 {
                times[channel] = now.wall
            } else if let from = state.gapFrom {
                times[channel] = from.wall
            }
        }
        return times
    }

    // MARK: The rule

    private mutating func release(_ channel: String, connection: Int, now: Now) -> Bool {
        guard var state = channels[channel] else { return false }
        let bit = UInt8(1) << UInt8(connection)
        guard state.holders & bit != 0 else { return false }
        state.holders &= ~bit
        if state.holders == 0 { state.gapFrom = (now.wall, now.instant) }
        channels[channel] = state
        return state.holders == 0
    }
}
