/// A bridge's N Pusher connections (`[bridge.pusher] connections`) seen by the bridge machine as
/// one (docs/pusher-merge.md), as a pure state machine: no I/O, no clock reads.
///
/// The daemon tells it what each connection reports — its state, a subscription that took effect
/// or failed, an event, a presence change — and it answers what the bridge machine is to see:
/// - **the Pusher side's state**: connected while any connection is; a change only when that
///   flips (with one connection every state passes through, as before);
/// - **a channel's subscription** once, when its first holder succeeds, with the ``PusherGap``
///   this ends (``ChannelCoverage``);
/// - **each event once** (``PusherEventMerge``): the first copy is published, later ones are
///   duplicates;
/// - **presence** consolidated over the connections (``PresenceConsolidation``).
///
/// With one connection everything passes through unchanged but the gap records, which a single
/// connection has too (a reconnect leaves a gap).
///
/// **Held events.** The first copies of a connection that has just become live beside another are
/// held until the other's copies arrive (``PusherEventMerge/Verdict/held``, the join hold); the set
/// keeps them and hands them out, in order, when the merge releases them: from ``deliver(_:channel:connection:now:)``
/// and, after any other call, from ``takeReleasedEvents()``.
public struct PusherConnectionSet: Sendable {
    /// An event as a connection delivered it, kept while it is held.
    public struct ArrivedEvent: Sendable, Equatable {
        public var name: String
        public var data: String?
        public var userID: String?
        public var receivedAt: UTCTimestamp

        public init(name: String, data: String?, userID: String?, receivedAt: UTCTimestamp) {
            self.name = name
            self.data = data
            self.userID = userID
            self.receivedAt = receivedAt
        }
    }

    public typealias Now = ChannelCoverage.Now

    /// The bridge's Pusher side, as the bridge machine sees it.
    public struct SideChange: Sendable, Equatable {
        public var state: String
        public var connected: Bool
        public var wasConnected: Bool
        /// The `socket_id` of the connection that made the change (nil when disconnected).
        public var socketID: String?
    }

    /// What one connection's report changes for the bridge machine.
    public struct Effects: Sendable, Equatable {
        /// The Pusher side's state changed.
        public var side: SideChange?
        /// Presence changes to pass to the mirrors.
        public var presence: [PresenceConsolidation.Change] = []
    }

    public let connections: Int
    public private(set) var coverage: ChannelCoverage
    public private(set) var merge: PusherEventMerge
    public private(set) var presence: PresenceConsolidation
    /// Per connection: its last state (`PusherConnectionState`'s raw value) and `socket_id`.
    public private(set) var states: [String]
    public private(set) var socketIDs: [String?]
    /// Per channel, the events held, in the order the merge held them.
    private var held: [String: [ArrivedEvent]] = [:]

    /// `connections` connections (clamped to 1…3), with the channels' last-held times from the
    /// state directory.
    public init(connections: Int, lastHeld: [String: UTCTimestamp] = [:], limits: PusherEventMerge.Limits = .bridge) {
        let count = min(max(connections, 1), 3)
        self.connections = count
        coverage = ChannelCoverage(connections: count, lastHeld: lastHeld)
        merge = PusherEventMerge(connections: count, limits: limits)
        presence = PresenceConsolidation(connections: count)
        states = Array(repeating: "initialized", count: count)
        socketIDs = Array(repeating: nil, count: count)
    }

    /// Whether at least one connection is connected.
    public var anyConnected: Bool { coverage.anyConnectionUp }

    // MARK: Connections

    /// Connection `connection` is now in `state` (`connected` when it is `connected`, with its
    /// `socketID`). Held events its going down released are in ``takeReleasedEvents()``.
    public mutating func connectionChanged(
        _ connection: Int, to state: String, connected: Bool, socketID: String?, now: Now
    ) -> Effects {
        guard states.indices.contains(connection) else { return Effects() }
        let wasAnyConnected = anyConnected
        let wasConnected = coverage.connectionUp[connection]
        states[connection] = state
        socketIDs[connection] = connected ? socketID : nil
        var effects = Effects()
        if connected {
            coverage.connectionCameUp(connection)
        } else if wasConnected {
            // Before the coverage forgets: which channels this connection held, and who else does.
            let held = coverage.channelsHeld(by: connection)
            coverage.connectionWentDown(connection, now: now)
            merge.connectionDown(connection)
            for channel in held {
                effects.presence += presence.connectionLost(connection, channel: channel, stillHeld: coverage.isHeld(channel))
            }
        }
        if connections == 1 {
            effects.side = SideChange(state: state, connected: connected, wasConnected: wasConnected, socketID: socketID)
        } else if anyConnected != wasAnyConnected {
            effects.side = SideChange(
                state: connected ? state : (anyConnected ? "connected" : state), connected: anyConnected,
                wasConnected: wasAnyConnected, socketID: connected ? socketID : nil)
        }
        return effects
    }

    /// The `socket_id` to exclude from the bridge's own HTTP publishes: the first connected one.
    public var socketID: String? { socketIDs.lazy.compactMap { $0 }.first }

    // MARK: Channels

    /// Connection `connection`'s subscription to `channel` took effect. Returns whether it is the
    /// channel's first holder (the bridge machine hears of it then), and the gap it ends.
    public mutating func subscribed(_ channel: String, connection: Int, now: Now) -> (first: Bool, gap: PusherGap?) {
        let first = !coverage.isHeld(channel)
        let gap = coverage.subscribed(channel, connection: connection, now: now)
        merge.connectionLive(connection, channel: channel, now: now.instant)
        return (first, gap)
    }

    /// Connection `connection`'s subscription to `channel` was refused. Returns whether the bridge
    /// machine is to hear of it: when no other connection holds the channel.
    public mutating func subscriptionFailed(_ channel: String, connection: Int, now: Now) -> Bool {
        coverage.unsubscribed(channel, connection: connection, now: now)
        merge.connectionLost(connection, channel: channel)
        return !coverage.isHeld(channel)
    }

    /// The bridge left `channel` on purpose (on every connection): no gap, forgotten.
    public mutating func channelLeft(_ channel: String) {
        coverage.channelLeft(channel)
        merge.channelLeft(channel)
        presence.channelLeft(channel)
    }

    /// In a cluster: this member takes `channel` over from a holder that died with it, last heard
    /// from at `lastHeldAt`, or (nil) that hands it over (``ChannelCoverage/takenOver(_:lastHeldAt:)``).
    public mutating func takenOver(_ channel: String, lastHeldAt: UTCTimestamp?) {
        coverage.takenOver(channel, lastHeldAt: lastHeldAt)
    }

    // MARK: Events

    /// Connection `connection` delivered an event on `channel`: publish it, or suppress it as a
    /// duplicate or as an echo of the bridge's own publish.
    public mutating func event(connection: Int, channel: String, key: PusherEventKey, now: Now) -> PusherEventMerge.Verdict {
        merge.event(connection: connection, channel: channel, key: key, now: now.instant)
    }

    /// The bridge publishes an event on `channel` itself, excluding connection `sentOn` (its
    /// `socket_id`, or the connection a client event goes out on): the other connections' copies
    /// will be echoes.
    public mutating func ownEvent(channel: String, key: PusherEventKey, sentOn: Int?, now: Now) {
        merge.ownEvent(channel: channel, key: key, sentOn: sentOn, now: now.instant)
    }

    /// A `pusher:subscription_count` as if the bridge were one subscriber: Pusher counts each of
    /// its connections holding the channel.
    public func subscriptionCountAsOneSubscriber(_ count: Int, on channel: String) -> Int {
        let ours = coverage.holders(of: channel).count
        return ours > 1 ? max(0, count - (ours - 1)) : count
    }

    /// Drops what the merge keeps past its time (quiet channels), and ends join holds that are due:
    /// their events are then in ``takeReleasedEvents()``.
    public mutating func expire(now: Now) { merge.expire(now: now.instant) }

    /// Connection `connection` delivered `event` on `channel`: the merge's verdict, and what to
    /// publish now, in order — held events the merge released, then this one if it is a first copy.
    public mutating func deliver(
        _ event: ArrivedEvent, channel: String, connection: Int, now: Now
    ) -> (verdict: PusherEventMerge.Verdict, publish: [(channel: String, event: ArrivedEvent)]) {
        let key = PusherEventKey(name: event.name, data: event.data, userID: event.userID)
        let verdict = merge.event(connection: connection, channel: channel, key: key, now: now.instant)
        var publish = takeReleasedEvents()
        switch verdict {
        case .publish: publish.append((channel, event))
        case .held: held[channel, default: []].append(event)
        case .duplicate, .ownEcho: break
        }
        return (verdict, publish)
    }

    /// Held events the merge released since the last look (a connection went down, a hold ended,
    /// a channel was left), in order: publish them.
    public mutating func takeReleasedEvents() -> [(channel: String, event: ArrivedEvent)] {
        var out: [(channel: String, event: ArrivedEvent)] = []
        for channel in merge.takeReleased() {
            for event in held.removeValue(forKey: channel) ?? [] { out.append((channel, event)) }
        }
        return out
    }

    // MARK: Presence

    public mutating func presenceSubscribed(_ channel: String, connection: Int, members: [PresenceMember]) -> [PresenceConsolidation.Change]
    {
        presence.subscribed(channel, connection: connection, members: members)
    }

    public mutating func presenceAdded(_ channel: String, connection: Int, member: PresenceMember) -> [PresenceConsolidation.Change] {
        presence.added(channel, connection: connection, member: member)
    }

    public mutating func presenceRemoved(_ channel: String, connection: Int, userID: String) -> [PresenceConsolidation.Change] {
        presence.removed(channel, connection: connection, userID: userID)
    }
}
