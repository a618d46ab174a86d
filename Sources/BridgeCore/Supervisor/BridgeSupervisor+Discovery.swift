/// Channel discovery at work (docs/contract.md §7.1): polls, their answers, and what Pusher and
/// webhooks report, fed to ``ChannelDiscovery``; its subscribe and unsubscribe go to the Pusher
/// client like those of configured channels, and presence rooms through the bridge machine's
/// mirrors (§5.3). In a cluster the joins and leaves only change this member's list, which it
/// publishes where it owns the rule; the members subscribe from the group's lists (§7.4).
extension BridgeSupervisor {
    /// Whether discovery rule `rule` mirrors presence rooms: presence mirrors' rules are named
    /// `presence:<prefix>`, and rule names cannot contain ':'.
    static func isPresence(_ rule: String) -> Bool { rule.hasPrefix("presence:") }

    /// A poll the machine asked for is about to go out: false when another member of the cluster
    /// polls this rule (its list arrives through the broker); the poll is then skipped.
    public mutating func pollStarting(rule: String, _ now: Now) -> Bool {
        guard let cluster, !cluster.membership.isDiscoveryOwner(rule: rule, now: now.instant) else { return true }
        discovery.pollSkipped(rule: rule, now: now.instant)
        return false
    }

    /// A poll succeeded: its channels to the machine; in a cluster its list may be published from
    /// now on; in presence rooms nobody is in, ghosts of an earlier run are cleared (§5.3).
    public mutating func pollSucceeded(rule: String, prefix: String, channels: [OccupiedChannel], _ now: Now) -> [Action] {
        if cluster != nil { cluster?.polledAsOwner.insert(rule) }
        let changes = discovery.pollSucceeded(rule: rule, channels: channels, now: now.instant)
        // Changes publish the lists that differ (`discoveryActions`); a new owner whose poll changed
        // nothing of its own list may still differ from the group's.
        var actions = changes.isEmpty ? publishDiscovered(now) : discoveryActions(changes, now)
        if Self.isPresence(rule) {
            let names = Set(channels.map(\.name))
            actions += lift(bridge.discoveredRoomsPolled(prefix: prefix, occupied: names, receivedAtMillis: now.millis), now)
        }
        return actions
    }

    /// A poll failed with `error` (described): counted, logged at most six times a minute, retried
    /// with backoff when `retryable`, else at the next interval.
    public mutating func pollFailed(
        rule: String, prefix: String, error: String, retryable: Bool, unitRandom: Double = 0.5, _ now: Now
    ) -> [Action] {
        let (log, suppressed) = pollFailureLog.allow(now: now.instant)
        var actions: [Action] = [
            .discoveryPollFailed(rule: rule, prefix: prefix, error: error, retryable: retryable, suppressedLogs: log ? suppressed : nil)
        ]
        actions += discoveryActions(
            discovery.pollFailed(rule: rule, retryable: retryable, now: now.instant, unitRandom: unitRandom), now)
        return actions
    }

    /// A poll could not be made at all (no HTTP client: `check` refuses that configuration).
    public mutating func pollImpossible(rule: String, _ now: Now) -> [Action] {
        discoveryActions(discovery.pollFailed(rule: rule, retryable: false, now: now.instant), now)
    }

    /// An event on `channel` (it is not idle); `subscriptionCount` when it was a
    /// `pusher:subscription_count` event (counted after the bridge's own subscription succeeded).
    public mutating func pusherEventSeen(on channel: String, subscriptionCount: Int?, _ now: Now) -> [Action] {
        discovery.eventReceived(on: channel, now: now.instant)
        guard let count = subscriptionCount else { return [] }
        return discoveryActions(discovery.subscriptionCountChanged(channel, count: count, now: now.instant), now)
    }

    /// Pusher confirmed a subscription: discovery counts from now on, and in a cluster the
    /// channel goes into the held report.
    public mutating func pusherSubscriptionSucceeded(_ channel: String, _ now: Now) -> [Action] {
        discovery.subscriptionSucceeded(channel, now: now.instant)
        guard cluster != nil else { return [] }
        return clusterEvent(now) { $0.channelSubscribed(channel, now: now.instant) }
    }

    /// Pusher refused a subscription: discovery lets the channel go.
    public mutating func pusherSubscriptionFailed(_ channel: String, _ now: Now) -> [Action] {
        discoveryActions(discovery.subscriptionFailed(channel, now: now.instant), now)
    }

    /// A `channel_occupied` webhook (docs/contract.md §7.2): joined at once if a prefix takes it,
    /// and its prefix polled.
    public mutating func channelOccupied(_ channel: String, _ now: Now) -> [Action] {
        discoveryActions(discovery.channelOccupied(channel, now: now.instant), now)
    }

    /// A `subscription_count` webhook: `count` subscribers on `channel`, counted at `asOf` (nil: unknown).
    public mutating func webhookSubscriptionCount(_ channel: String, count: Int, asOf: Instant?, _ now: Now) -> [Action] {
        discoveryActions(discovery.subscriptionCountChanged(channel, count: count, asOf: asOf, now: now.instant), now)
    }

    // MARK: Discovery's actions

    /// Discovery's actions as the supervisor's, then `discovered_channels` per rule. In a cluster
    /// joins and leaves go into this member's list only, and the lists it owns are published.
    mutating func discoveryActions(_ discoveryActions: [ChannelDiscovery.Action], _ now: Now) -> [Action] {
        guard !discoveryActions.isEmpty else { return [] }
        let clustered = cluster != nil
        var actions: [Action] = []
        for action in discoveryActions {
            switch action {
            case .poll(let rule, let prefix, let info):
                actions.append(.poll(rule: rule, prefix: prefix, info: info))
            case .countsRefused(let rule):
                actions.append(.countsRefused(rule: rule))
            case .subscribe(let channel):
                if !clustered { actions.append(.subscribeChannel(channel)) }  // in a cluster the holder subscribes
            case .unsubscribe(let channel):
                if !clustered { actions.append(.unsubscribeChannel(channel)) }
            case .joined(let channel, let rule):
                guard !clustered else {
                    cluster?.localDiscovered[rule, default: []].insert(channel)
                    continue
                }
                actions.append(.discoveryJoined(channel: channel, rule: rule))
                if Self.isPresence(rule) {
                    actions += lift(bridge.discoveredRoomJoined(channel, receivedAtMillis: now.millis), now, settle: false)
                }
            case .left(let channel, let rule, let reason):
                guard !clustered else {
                    cluster?.localDiscovered[rule]?.remove(channel)
                    continue
                }
                actions.append(.discoveryLeft(channel: channel, rule: rule, reason: reason.rawValue))
                if Self.isPresence(rule) {
                    actions += lift(bridge.discoveredRoomLeft(channel, receivedAtMillis: now.millis), now, settle: false)
                }
            case .skipped(let rule, let count, let first):
                let (log, suppressed) = skippedLogs[rule, default: RateLimitedLog(perMinute: 1)].allow(now: now.instant)
                actions.append(.discoverySkipped(rule: rule, count: count, first: first, suppressedLogs: log ? suppressed : nil))
            }
        }
        if clustered { actions += publishDiscovered(now) }
        for rule in discovery.rules {
            actions.append(.discoveredChannels(rule: rule.name, count: discovery.heldCount(rule: rule.name)))
        }
        return actions
    }
}
