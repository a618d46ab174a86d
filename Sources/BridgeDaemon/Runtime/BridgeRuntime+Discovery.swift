import BridgeCore
import Locking
import Logging
import PusherChannels

/// The discovery state of one bridge (docs/contract.md §7.1): BridgeCore's ``ChannelDiscovery``
/// decides, this holds it and the polls waiting to go out.
final class BridgeDiscovery: Sendable {
    /// One `GET /apps/ID/channels` to make.
    struct Poll: Sendable {
        var rule: String
        var prefix: String
        var info: String
    }

    /// The decisions; the lock only guards the machine, never I/O.
    let machine: Locked<ChannelDiscovery>
    /// Polls the machine asked for, run by ``BridgeRuntime/runDiscovery()``.
    let polls = AsyncStream.makeStream(of: Poll.self)
    /// `skipped` log lines per rule: at most one a minute each.
    let skippedLogs = Locked<[String: RateLimitedLog<ContinuousClock.Instant>]>([:])
    /// Failed-poll log lines: at most a few a minute for the bridge.
    let failureLog = Locked(RateLimitedLog<ContinuousClock.Instant>(perMinute: 6))
    /// `{"subscription_count":N}` → N.
    static let countPointer = try? JSONPointer.parse("/subscription_count").get()

    init(settings: BridgeSettings) {
        machine = Locked(
            ChannelDiscovery(rules: settings.discoveryRules, fixedChannels: settings.pusherChannels, backoff: settings.reconnect))
    }
}

/// Channel discovery at work: the polls, the timer, and what Pusher and webhooks report, fed to
/// the bridge's ``ChannelDiscovery``; its subscribe and unsubscribe go through the Pusher client
/// like those of configured channels (authorization, resubscription after a reconnect), and
/// presence rooms through the bridge machine's mirrors (docs/contract.md §7.1, §5.3).
extension BridgeRuntime {
    /// Runs the discovery timer and the polls until the bridge stops. Polls start at once.
    func runDiscovery() async {
        let now = ContinuousClock.now
        performDiscovery(discovery.machine.withLock { $0.started(now: now) })
        await withDiscardingTaskGroup { group in
            group.addTask { await self.discoveryTimer() }
            for await poll in discovery.polls.stream {
                group.addTask { await self.discoveryPoll(poll) }
            }
        }
    }

    /// Wakes at the machine's ``ChannelDiscovery/nextDeadline``, and at least once a second to
    /// pick up deadlines set meanwhile (answers, reloads).
    private func discoveryTimer() async {
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let deadline = discovery.machine.withLock { $0.nextDeadline }
            if let deadline, deadline <= now {
                performDiscovery(discovery.machine.withLock { $0.deadlineReached(now: now) })
                continue
            }
            let wake = min(deadline ?? now + .seconds(1), now + .seconds(1))
            do { try await Task.sleep(until: wake, tolerance: .milliseconds(5)) } catch { return }
        }
    }

    /// `GET /apps/ID/channels?filter_by_prefix=P&info=…`, its answer or failure to the machine.
    private func discoveryPoll(_ poll: BridgeDiscovery.Poll) async {
        guard clusterPollsDiscovery(rule: poll.rule) else {
            // Another member of the cluster polls this rule; its list arrives through the broker.
            let now = ContinuousClock.now
            discovery.machine.withLock { $0.pollSkipped(rule: poll.rule, now: now) }
            return
        }
        guard let rest else {
            // `check` refuses channel_prefix without app_id and secret; never here in practice.
            let now = ContinuousClock.now
            performDiscovery(discovery.machine.withLock { $0.pollFailed(rule: poll.rule, retryable: false, now: now) })
            return
        }
        do {
            let reply = try await rest.channels(prefix: poll.prefix, info: poll.info.isEmpty ? [] : [poll.info])
            let occupied = reply.map { name, info in
                OccupiedChannel(
                    name, count: poll.info == "user_count" ? info.userCount : poll.info.isEmpty ? nil : info.subscriptionCount)
            }
            let now = ContinuousClock.now
            clusterDiscoveryPolled(rule: poll.rule)
            performDiscovery(discovery.machine.withLock { $0.pollSucceeded(rule: poll.rule, channels: occupied, now: now) })
            // A new owner whose poll changed nothing of its own list may still differ from the group's.
            clusterPublishDiscovered()
            if poll.rule.hasPrefix("presence:") {
                // Ghosts of an earlier run in rooms nobody is in are cleared now (§5.3).
                let receivedAt = UTCTimestamp.now().millisecondsSince1970
                let names = Set(reply.keys)
                execute(machine.withLock { $0.discoveredRoomsPolled(prefix: poll.prefix, occupied: names, receivedAtMillis: receivedAt) })
            }
        } catch {
            let now = ContinuousClock.now
            metrics.errors(bridge: name, kind: "pusher_http").increment()
            let (log, suppressed) = discovery.failureLog.withLock { $0.allow(now: now) }
            if log {
                logger.warning(
                    "channel discovery poll failed; held channels are kept",
                    metadata: [
                        "bridge.rule": "\(poll.rule)", "pusher.channel_prefix": "\(poll.prefix)", "error": "\(error)",
                        "retry": "\(error.isRetryable ? "with backoff" : "next interval")", "suppressed_logs": "\(suppressed)",
                    ])
            }
            let unitRandom = Double.random(in: 0...1)
            performDiscovery(
                discovery.machine.withLock {
                    $0.pollFailed(rule: poll.rule, retryable: error.isRetryable, now: now, unitRandom: unitRandom)
                })
            // The timer may sleep up to a second before it sees the retry's deadline; the first
            // backoff delays are shorter (200 ms, 400 ms, … docs/contract.md §7.1 "failed poll").
            guard let retryAt = discovery.machine.withLock({ $0.nextDeadline }) else { return }
            do { try await Task.sleep(until: retryAt, tolerance: .milliseconds(5)) } catch { return }
            let due = ContinuousClock.now
            performDiscovery(discovery.machine.withLock { $0.deadlineReached(now: due) })
        }
    }

    /// Replaces the discovery rules on reload (called by ``applyRules(_:)``): held channels of
    /// unchanged rules stay, those of removed rules are left.
    func applyDiscoveryRules(_ settings: BridgeSettings) {
        let now = ContinuousClock.now
        let (before, actions) = discovery.machine.withLock {
            ($0.rules.map(\.name), $0.rulesReplaced(by: settings.discoveryRules, fixedChannels: settings.pusherChannels, now: now))
        }
        performDiscovery(actions)
        let kept = Set(settings.discoveryRules.map(\.name))
        for rule in before where !kept.contains(rule) { metrics.discoveredChannels(bridge: name, rule: rule).record(0) }
    }

    // MARK: What Pusher and webhooks report

    /// A `channel_occupied` webhook for `channel` (docs/contract.md §7.2): joined at once if a
    /// prefix takes it, and its prefix polled.
    func discoveryChannelOccupied(_ channel: String) {
        let now = ContinuousClock.now
        performDiscovery(discovery.machine.withLock { $0.channelOccupied(channel, now: now) })
    }

    /// A `pusher:subscription_count` event: `count` subscribers on `channel`, counted after the
    /// bridge's own subscription succeeded (Pusher sends it to subscribers only).
    func discoverySubscriptionCount(_ channel: String, count: Int) {
        let now = ContinuousClock.now
        performDiscovery(discovery.machine.withLock { $0.subscriptionCountChanged(channel, count: count, now: now) })
    }

    /// A `subscription_count` webhook: `count` subscribers on `channel`, counted at `asOf` (nil: unknown).
    func discoveryWebhookCount(_ channel: String, count: Int, asOf: ContinuousClock.Instant?) {
        let now = ContinuousClock.now
        performDiscovery(discovery.machine.withLock { $0.subscriptionCountChanged(channel, count: count, asOf: asOf, now: now) })
    }

    /// What the Pusher consumer saw, as far as discovery cares: any event keeps its channel from
    /// idling, `pusher:subscription_count` carries a count, subscriptions succeed or fail, the
    /// connection drops.
    func discoveryObserved(_ update: PusherUpdate) {
        switch update {
        case .event(let event):
            guard let channel = event.channel else { return }
            let now = ContinuousClock.now
            discovery.machine.withLock { $0.eventReceived(on: channel, now: now) }
            if event.name == "pusher:subscription_count", let count = Self.subscriptionCount(event.data) {
                discoverySubscriptionCount(channel, count: count)
            }
        case .subscriptionSucceeded(let channel):
            let now = ContinuousClock.now
            discovery.machine.withLock { $0.subscriptionSucceeded(channel, now: now) }
        case .subscriptionFailed(let channel, _):
            let now = ContinuousClock.now
            performDiscovery(discovery.machine.withLock { $0.subscriptionFailed(channel, now: now) })
        case .connectionStateChanged(let change) where change.previous == .connected && change.current != .connected:
            let now = ContinuousClock.now
            discovery.machine.withLock { $0.pusherDisconnected(now: now) }
        case .presence, .connectionStateChanged, .error:
            break
        }
    }

    /// N of `{"subscription_count":N}`.
    static func subscriptionCount(_ data: String?) -> Int? {
        guard let data, let pointer = BridgeDiscovery.countPointer else { return nil }
        var document = PayloadDocument(Array(data.utf8))
        return document.value(at: pointer)?.templateText.flatMap { Int($0) }
    }

    // MARK: Carrying out the machine's actions

    /// Carries out discovery's actions in order, then updates `discovered_channels`. In a cluster
    /// the joins and leaves change this member's list, published where it owns the rule; the
    /// members subscribe from the group's lists (BridgeRuntime+Cluster.swift).
    func performDiscovery(_ actions: [ChannelDiscovery.Action]) {
        guard !actions.isEmpty else { return }
        if cluster != nil {
            performClusteredDiscovery(actions)
            return
        }
        for action in actions { performDiscoveryAction(action) }
        recordDiscoveredChannels()
    }

    /// One of discovery's actions, as carried out without a cluster.
    private func performDiscoveryAction(_ action: ChannelDiscovery.Action) {
        switch action {
        case .poll(let rule, let prefix, let info):
            discovery.polls.continuation.yield(BridgeDiscovery.Poll(rule: rule, prefix: prefix, info: info))
        case .countsRefused(let rule):
            logger.warning(
                """
                channel discovery: the server refused info=subscription_count (subscription counting not enabled?); \
                polling without counts, channels are left after idle_timeout without events
                """,
                metadata: ["bridge.rule": "\(rule)"])
        case .subscribe(let channel):
            // The client's own subscribe, as for configured channels (authorization,
            // resubscription after reconnects); it ignores a channel it already has. Not
            // through `execute(.subscribeChannel)`, whose check copies the whole channel
            // list: with thousands of discovered channels that would be quadratic.
            pusher.subscribe(channel)
        case .unsubscribe(let channel):
            execute(.unsubscribeChannel(channel))
        case .joined(let channel, let rule):
            logger.debug("discovered channel joined", metadata: ["pusher.channel": "\(channel)", "bridge.rule": "\(rule)"])
            // Presence mirrors are named `presence:<prefix>`; rule names cannot contain ':'.
            if rule.hasPrefix("presence:") {
                let receivedAt = UTCTimestamp.now().millisecondsSince1970
                execute(machine.withLock { $0.discoveredRoomJoined(channel, receivedAtMillis: receivedAt) })
            }
        case .left(let channel, let rule, let reason):
            logger.info(
                "discovered channel left",
                metadata: ["pusher.channel": "\(channel)", "bridge.rule": "\(rule)", "reason": "\(reason.rawValue)"])
            if rule.hasPrefix("presence:") {
                let receivedAt = UTCTimestamp.now().millisecondsSince1970
                execute(machine.withLock { $0.discoveredRoomLeft(channel, receivedAtMillis: receivedAt) })
            }
        case .skipped(let rule, let count, let first):
            metrics.discoverySkipped(bridge: name, rule: rule).increment(by: count)
            let now = ContinuousClock.now
            let (log, suppressed) = discovery.skippedLogs.withLock { logs in
                logs[rule, default: RateLimitedLog(perMinute: 1)].allow(now: now)
            }
            if log {
                logger.warning(
                    "channel discovery: max_channels reached, channels skipped",
                    metadata: [
                        "bridge.rule": "\(rule)", "skipped": "\(count)", "pusher.channel": "\(first)",
                        "suppressed_logs": "\(suppressed)",
                    ])
            }
        }
    }

    /// `discovered_channels` per rule.
    private func recordDiscoveredChannels() {
        let held = discovery.machine.withLock { machine in machine.rules.map { ($0.name, machine.heldCount(rule: $0.name)) } }
        for (rule, count) in held { metrics.discoveredChannels(bridge: name, rule: rule).record(count) }
    }

    /// ``performDiscovery(_:)`` in a cluster: polls, logs and counts as alone; joins and leaves
    /// only into this member's list, then the lists this member owns are published.
    private func performClusteredDiscovery(_ actions: [ChannelDiscovery.Action]) {
        var local: [ChannelDiscovery.Action] = []
        for action in actions {
            switch action {
            case .subscribe, .unsubscribe:
                break  // the holder subscribes, from the group's list
            case .joined(let channel, let rule):
                clusterDiscoveryChanged(rule: rule, channel: channel, joined: true)
            case .left(let channel, let rule, _):
                clusterDiscoveryChanged(rule: rule, channel: channel, joined: false)
            case .poll, .countsRefused, .skipped:
                local.append(action)
            }
        }
        // The rest as without a cluster.
        for action in local { performDiscoveryAction(action) }
        clusterPublishDiscovered()
        recordDiscoveredChannels()
    }
}
