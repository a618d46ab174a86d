/// Every decision of one running bridge, in one pure machine (docs/style.md §1: no I/O, no clock
/// reads; events take `now:`): the bridge machine (``BridgeStateMachine``: routing, presence,
/// shaping, readiness), channel discovery (``ChannelDiscovery``), the cluster membership and what
/// the member feeds it (``SupervisedCluster``), webhooks in (``WebhookReceiver``), the 403 pause of
/// MQTT → Pusher delivery (``DeliveryPause``), whether the bridge is stopping, and the rate limits
/// of the log lines they cause.
///
/// The daemon's `BridgeRuntime` keeps one lock around it, feeds it what happened (events named for
/// it) and carries out the ``Action``s it returns; its timer task sleeps until ``nextDeadline``
/// and then calls ``tick(now:)``. The runtime decides nothing of its own.
public struct BridgeSupervisor: Sendable {
    public typealias Instant = ContinuousClock.Instant
    public typealias BridgeAction = BridgeStateMachine<Instant>.Action

    /// When an event happened: the monotonic instant for deadlines, and the wall clock in
    /// milliseconds since 1970 for what goes into messages (presence lines, dead letters).
    public struct Now: Sendable, Equatable {
        public var instant: Instant
        public var millis: Int64

        public init(_ instant: Instant, millis: Int64) {
            self.instant = instant
            self.millis = millis
        }
    }

    /// What the runtime carries out, in order.
    public enum Action: Sendable, Equatable {
        /// One of the bridge machine's actions (outbox appends, counters, status, MQTT filters).
        case bridge(BridgeAction)
        /// In a cluster, before the `subscribeChannel` of a channel taken from another member:
        /// when its last holder, dead, was last heard from (the gap since then is reported), or nil
        /// when it hands the channel over (no gap) (docs/contract.md §8.1, "takeover gap").
        case channelTakenOver(String, lastHeldAt: UTCTimestamp?)
        /// Subscribe this Pusher channel (the client ignores one it has already).
        case subscribeChannel(String)
        /// Leave this Pusher channel.
        case unsubscribeChannel(String)
        /// Subscribe the cluster's membership filter: QoS 1, retained messages sent, no No Local.
        case subscribeMembership(filter: String)
        /// Publish a membership message (record, heartbeat, held report, discovered list, a dead
        /// member's `offline`), in order with the others; `rule` is empty.
        case publishMembership(MQTTPublish)
        /// Log and count what happened in the membership.
        case clusterReport(ClusterEvent)
        /// The `cluster_members` and `cluster_channels_held` gauges.
        case clusterGauges(members: Int, held: Int)
        /// The handover of a leaving member is done: the stopping bridge goes on.
        case leaveCompleted
        /// An echo of a group member's publish came back: counted as received and suppressed.
        case clusterEchoSuppressed
        /// An unreadable membership message: count `errors_total{kind="cluster"}`; log it when
        /// `suppressedLogs` is not nil (the lines left out since the last one).
        case clusterBadMessage(topic: String, bytes: Int, suppressedLogs: Int?)
        /// Poll `GET /apps/ID/channels?filter_by_prefix=prefix&info=info` for a discovery rule.
        case poll(rule: String, prefix: String, info: String)
        /// The server refused `info=subscription_count`: polling goes on without counts (log once).
        case countsRefused(rule: String)
        /// Discovery joined (log) or left (log with the reason) a channel for `rule`.
        case discoveryJoined(channel: String, rule: String)
        case discoveryLeft(channel: String, rule: String, reason: String)
        /// `max_channels` reached: count `count`; log when `suppressedLogs` is not nil.
        case discoverySkipped(rule: String, count: Int, first: String, suppressedLogs: Int?)
        /// A poll failed: count `errors_total{kind="pusher_http"}`; log when `suppressedLogs` is not nil.
        case discoveryPollFailed(rule: String, prefix: String, error: String, retryable: Bool, suppressedLogs: Int?)
        /// The `discovered_channels` gauge of `rule`.
        case discoveredChannels(rule: String, count: Int)
    }

    /// Routing, presence mirrors, shaping, readiness.
    public var bridge: BridgeStateMachine<Instant>
    /// Channel discovery (docs/contract.md §7.1).
    public internal(set) var discovery: ChannelDiscovery
    /// The cluster (docs/contract.md §7.4); nil without `[bridge.cluster]`.
    public internal(set) var cluster: SupervisedCluster?
    /// `skipped` log lines per discovery rule: at most one a minute each.
    var skippedLogs: [String: RateLimitedLog<Instant>] = [:]
    /// Failed-poll log lines: at most six a minute for the bridge.
    var pollFailureLog = RateLimitedLog<Instant>(perMinute: 6)
    /// Webhooks in (docs/contract.md §7.2); nil without `[bridge.webhooks]`.
    public internal(set) var webhooks: WebhookReceiver<Instant>?
    /// Limits the log lines of refused webhook requests: ten a minute.
    var webhookRefusalLog = RateLimitedLog<Instant>(perMinute: 10)
    /// Accepted webhook requests append to the outbox in this order.
    var webhookTurns = Turns()
    /// The 403 pause of MQTT → Pusher delivery (docs/contract.md §7.3).
    public var pause = DeliveryPause()
    /// When the allocator's free pages go back after a backlog drained.
    public private(set) var memory = MemoryRelease()
    /// `[bridge.users]` (docs/contract.md §8.2); nil when not mirrored.
    public internal(set) var users: UsersMirror?
    /// Whether the bridge was told to stop (it stops once).
    public private(set) var isStopping = false

    /// - Parameters:
    ///   - incarnation: random, chosen by the runtime: which process of this member it is.
    ///   - startedAt: the process's start in milliseconds since 1970, for the member record.
    public init(settings: BridgeSettings, incarnation: String, startedAt: Int64) {
        bridge = BridgeStateMachine(settings: settings)
        discovery = ChannelDiscovery(rules: settings.discoveryRules, fixedChannels: settings.pusherChannels, backoff: settings.reconnect)
        cluster = settings.cluster.map { SupervisedCluster(settings: $0, bridge: settings, incarnation: incarnation, startedAt: startedAt) }
        webhooks = WebhookReceiver(settings: settings)
        users = settings.users.map { UsersMirror(settings: $0, connections: settings.pusher.connections) }
    }

    /// How often the runtime's housekeeping runs (spool syncs, gauges, the watchdog's heartbeat).
    public static let housekeepingInterval = Duration.seconds(1)

    /// The runtime's housekeeping ran at `now` (the systemd watchdog's liveness signal): returns
    /// when it runs next.
    public mutating func housekept(now: Instant) -> Instant {
        bridge.heartbeat(now: now)
        return now + Self.housekeepingInterval
    }

    /// The runtime's housekeeping measured the bridge's backlog (both outboxes) at `now`: true when
    /// the allocator's free pages should be handed back (``MemoryRelease``).
    public mutating func backlogMeasured(_ backlog: Int, bytes: Int = 0, now: Instant) -> Bool {
        memory.measured(backlog: backlog, bytes: bytes, now: now)
    }

    /// The bridge is told to stop: true the first time only.
    public mutating func stopRequested() -> Bool {
        defer { isStopping = true }
        return !isStopping
    }

    // MARK: Life

    /// The bridge starts: its configured channels (in a cluster: wanted by the group), its MQTT
    /// filters, and discovery's first polls.
    public mutating func started(_ now: Now) -> [Action] {
        var actions = lift(bridge.started(), now, settle: false)
        actions += discoveryActions(discovery.started(now: now.instant), now)
        actions += settleCluster(now)
        return actions
    }

    /// The rules, presence mirrors, discovery rules (and in a cluster the group's wanted channels)
    /// and `[bridge.webhooks]` replaced on reload; `discovered_channels` of removed rules goes to 0.
    public mutating func rulesReplaced(by settings: BridgeSettings, _ now: Now) -> [Action] {
        var actions = lift(bridge.rulesReplaced(by: settings, receivedAtMillis: now.millis, now: now.instant), now, settle: false)
        let before = discovery.rules.map(\.name)
        actions += discoveryActions(
            discovery.rulesReplaced(by: settings.discoveryRules, fixedChannels: settings.pusherChannels, now: now.instant), now)
        let kept = Set(settings.discoveryRules.map(\.name))
        for rule in before where !kept.contains(rule) { actions.append(.discoveredChannels(rule: rule, count: 0)) }
        if cluster != nil {
            cluster?.discoveryRules = kept
            cluster?.wantedChanged = true
        }
        webhookSettingsChanged(settings)
        actions += settleCluster(now)
        return actions
    }

    /// The MQTT connection came up or went down (`state` as operators read it). In a cluster the
    /// membership filter is subscribed again on every connect, so the broker sends the retained
    /// records even when it kept the session.
    public mutating func mqttConnectionChanged(to state: String, connected: Bool, _ now: Now) -> [Action] {
        var actions = lift(
            bridge.mqttConnectionChanged(to: state, connected: connected, now: now.instant, receivedAtMillis: now.millis), now,
            settle: false)
        if let filter = cluster?.settings.membershipFilter {
            if connected {
                actions.append(.subscribeMembership(filter: filter))
                actions += clusterEvent(now) { $0.brokerConnected(now: now.instant) }
            } else {
                actions += clusterEvent(now) { $0.brokerDisconnected(now: now.instant) }
            }
        }
        actions += settleCluster(now)
        return actions
    }

    /// The Pusher connection's state changed (`state` as operators read it; `socketID` while
    /// connected): the bridge machine's readiness, discovery's counts (a drop makes them stale),
    /// the cluster's held reports (they carry the `socket_id`).
    public mutating func pusherConnectionChanged(
        to state: String, connected: Bool, wasConnected: Bool, socketID: String?, _ now: Now
    ) -> [Action] {
        if wasConnected && !connected { discovery.pusherDisconnected(now: now.instant) }
        var actions: [Action] = []
        if cluster != nil, connected || wasConnected {
            actions += clusterEvent(now) { $0.pusherConnectionChanged(socketID: connected ? socketID : nil, now: now.instant) }
        }
        actions += lift(
            bridge.pusherConnectionChanged(to: state, connected: connected, wasConnected: wasConnected, receivedAtMillis: now.millis),
            now)
        return actions
    }

    /// The earliest instant ``tick(_:)`` has something to do: the end of a `throttle` interval, a
    /// discovery poll or retry, a membership deadline (heartbeats, timeouts: a frozen process is
    /// noticed by the gap between them, held reports' publishes). Nil: nothing until the next event.
    public var nextDeadline: Instant? {
        [
            bridge.nextShapingDeadline, discovery.nextDeadline, cluster?.membership.nextDeadline,
            users?.nextDeadline,
        ]
        .compactMap { $0 }.min()
    }

    /// Whatever is due at `now`.
    public mutating func tick(_ now: Now) -> [Action] {
        var actions: [Action] = []
        if let due = bridge.nextShapingDeadline, due <= now.instant {
            var released: [BridgeAction] = []
            bridge.shapingTimerFired(now: now.instant, into: &released)
            // A released event of a channel another member sends is kept (the replay is not taken here).
            partitionMQTTToPusher(&released, now: now.instant, takingReplay: false)
            actions += lift(released, now, settle: false)
        }
        if let due = discovery.nextDeadline, due <= now.instant {
            actions += discoveryActions(discovery.deadlineReached(now: now.instant), now)
        }
        if let due = cluster?.membership.nextDeadline, due <= now.instant {
            actions += clusterEvent(now) { $0.tick(now: now.instant) }
        }
        if let due = users?.nextDeadline, due <= now.instant {
            actions += usersPublish(now) { $0.tick(now: now.instant) }
        }
        return actions
    }

    // MARK: The bridge machine's actions

    /// The bridge machine's actions as the supervisor's: its configured channels are, in a
    /// cluster, wanted by the group rather than subscribed here (the member holding them
    /// subscribes). With `settle`, the membership hears of the changed wanted channels at once.
    mutating func lift(_ bridgeActions: [BridgeAction], _ now: Now, settle: Bool = true) -> [Action] {
        var actions: [Action] = []
        actions.reserveCapacity(bridgeActions.count)
        for action in bridgeActions {
            switch action {
            case .subscribeChannel(let channel):
                guard cluster != nil else {
                    actions.append(.subscribeChannel(channel))
                    continue
                }
                cluster?.configured.insert(channel)
                cluster?.wantedChanged = true
            case .unsubscribeChannel(let channel):
                guard cluster != nil else {
                    actions.append(.unsubscribeChannel(channel))
                    continue
                }
                cluster?.configured.remove(channel)
                cluster?.wantedChanged = true
            case .enqueueToMQTT, .enqueueToPusher, .count, .received, .logDeadLetter, .keepDeadLetter, .logDropped, .connectionChanged,
                .publishStatus, .subscribeTopicFilter, .unsubscribeTopicFilter, .shapingHeld, .shapingTargetsFull:
                actions.append(.bridge(action))
            }
        }
        if settle { actions += settleCluster(now) }
        return actions
    }
}
