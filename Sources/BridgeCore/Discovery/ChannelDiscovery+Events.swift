import Backoff
import PusherProtocol

extension ChannelDiscovery {
    // MARK: Polls

    /// A poll of `rule` answered with the occupied `channels` under its prefix. Held channels it
    /// no longer lists are left (nobody there), listed ones whose count shows only the bridge
    /// are left, the others are joined up to `max_channels` (name order), the rest skipped.
    /// The next poll is due one `discovery_interval` from now (at once if a `channel_occupied`
    /// came meanwhile). An answer for a rule with no poll in flight (removed by a reload) is ignored.
    public mutating func pollSucceeded(rule name: String, channels: [OccupiedChannel], now: Instant) -> [Action] {
        guard var state = states[name], let started = state.pollStartedAt else { return [] }
        state.pollStartedAt = nil
        state.failures = 0
        state.nextPoll = state.pollAgain ? now : now.advanced(by: state.rule.settings.interval)
        state.pollAgain = false
        states[name] = state
        let rule = state.rule

        var listed: [String: Int?] = [:]
        for channel in channels where rule.takes(channel.name) && !fixed.contains(channel.name) {
            listed.updateValue(channel.count, forKey: channel.name)
        }
        var actions: [Action] = []
        for channel in state.held.sorted() where listed[channel] == nil {
            // Taken after the request went out: this answer cannot know it.
            guard let taken = held[channel]?.since, taken <= started else { continue }
            release(channel, reason: .vacated, now: now, into: &actions)
        }
        var candidates: [String] = []
        for (channel, count) in listed.sorted(by: { $0.key < $1.key }) {
            guard var current = held[channel] else {
                if count.map({ $0 > 0 }) ?? true { candidates.append(channel) }
                continue
            }
            if let count {
                current.countsSeen = true
                held[channel] = current
                // Counted when the request went out.
                if countSaysAlone(count, asOf: started, in: current) {
                    release(channel, reason: .alone, now: now, into: &actions)
                    continue
                }
            }
            if states[name]?.held.contains(channel) == false { candidates.append(channel) }
        }
        take(candidates, rule: name, replacingSkipped: true, now: now, into: &actions)
        for (channel, count) in listed where count != nil && held[channel]?.countsSeen == false { held[channel]?.countsSeen = true }
        return actions
    }

    /// A poll of `rule` failed. `retryable` (network error, 5xx, 429): try again after the
    /// reconnect backoff for the number of failures in a row, `unitRandom` in [0, 1] choosing the
    /// jitter (``ReconnectPolicy/delay(attempt:unitRandom:)``). Otherwise (another 4xx) the next
    /// poll waits one `discovery_interval` — except the first refusal of `info=subscription_count`
    /// (hosted Pusher refuses it unless subscription counting is enabled): the prefix is polled
    /// again at once, without counts, and from then on. Held channels are kept either way.
    public mutating func pollFailed(rule name: String, retryable: Bool, now: Instant, unitRandom: Double = 0.5) -> [Action] {
        guard var state = states[name], state.pollStartedAt != nil else { return [] }
        state.pollStartedAt = nil
        state.pollAgain = false
        if !retryable, !state.countsRefused, state.pollInfo == "subscription_count" {
            state.countsRefused = true
            state.failures = 0
            state.nextPoll = now
            states[name] = state
            return [.countsRefused(rule: name)]
        }
        if retryable {
            state.nextPoll = now.advanced(by: backoff.delay(attempt: state.failures, unitRandom: unitRandom))
            state.failures += 1
        } else {
            state.failures = 0
            state.nextPoll = now.advanced(by: state.rule.settings.interval)
        }
        states[name] = state
        return []
    }

    /// How many polls of `rule` failed in a row.
    public func pollFailures(rule: String) -> Int { states[rule]?.failures ?? 0 }

    // MARK: What Pusher reports

    /// A `channel_occupied` webhook (docs/contract.md §7.2): every rule whose prefix takes
    /// `channel` joins it if it has room (else skips it) and polls its prefix at once — or right
    /// after the poll in flight.
    public mutating func channelOccupied(_ channel: String, now: Instant) -> [Action] {
        guard !fixed.contains(channel), ChannelName.problem(with: channel) == nil else { return [] }
        var actions: [Action] = []
        for name in order {
            guard let state = states[name], state.rule.takes(channel) else { continue }
            take([channel], rule: name, replacingSkipped: false, now: now, into: &actions)
            if state.pollStartedAt == nil {
                startPoll(name, now: now, into: &actions)
            } else {
                states[name]?.pollAgain = true
            }
        }
        return actions
    }

    /// A `pusher:subscription_count` event: `count` subscriptions on `channel`, counted now (Pusher
    /// sends it to subscribers only, so after the bridge's own `subscription_succeeded`).
    public mutating func subscriptionCountChanged(_ channel: String, count: Int, now: Instant) -> [Action] {
        subscriptionCountChanged(channel, count: count, asOf: now, now: now)
    }

    /// `count` subscriptions on `channel`, counted at `asOf` (a `subscription_count` webhook: see
    /// ``webhookCountAsOf(timeMillis:nowMillis:now:)``; nil when unknown). The channel is left
    /// when the count says the bridge is alone there (``countSaysAlone(_:asOf:in:)``).
    public mutating func subscriptionCountChanged(_ channel: String, count: Int, asOf: Instant?, now: Instant) -> [Action] {
        guard var current = held[channel] else { return [] }
        // Whenever it was taken, the server reports counts: idle_timeout no longer applies.
        current.countsSeen = true
        held[channel] = current
        guard countSaysAlone(count, asOf: asOf, in: current) else { return [] }
        var actions: [Action] = []
        release(channel, reason: .alone, now: now, into: &actions)
        return actions
    }

    /// Whether `count` subscriptions (users, for presence), counted at `asOf`, leave the bridge
    /// alone in `channel`:
    /// - its subscription took effect at or before `asOf`: the bridge is one of them, ≤ 1 is alone;
    /// - no subscription of the bridge is in effect (not yet succeeded, or lost with the
    ///   connection): the count is of others only, 0 is alone;
    /// - it took effect after `asOf`, or `asOf` is unknown: the count predates the bridge's own
    ///   subscription and says nothing about now — never alone. (A `channel_occupied` webhook comes
    ///   with a `subscription_count` of 1, the first device alone: read after the bridge subscribed,
    ///   that 1 is not the bridge. Pusher reports the count again once the bridge is in.)
    func countSaysAlone(_ count: Int, asOf: Instant?, in channel: HeldChannel) -> Bool {
        guard let confirmed = channel.confirmedAt else { return count <= 0 }
        guard let asOf, confirmed <= asOf else { return false }
        return count <= 1
    }

    /// When a `subscription_count` webhook's counts were taken, on the daemon's clock: Pusher
    /// makes the request at `time_ms` (`timeMillis`, its wall clock; nil when the body has none),
    /// after holding its events for up to ``webhookBatchWindow``, so they may be that much older.
    /// A `time_ms` ahead of `nowMillis` (the sender's clock ahead of ours) counts as now.
    public static func webhookCountAsOf(timeMillis: Int64?, nowMillis: Int64, now: Instant) -> Instant? {
        guard let timeMillis else { return nil }
        // Clamped into 0...nowMillis first, so that the difference cannot overflow.
        let behind = nowMillis - min(max(timeMillis, 0), max(nowMillis, 0))
        return now - .milliseconds(behind) - webhookBatchWindow
    }

    /// How long Pusher holds webhook events to batch them before it makes the request (hosted
    /// Pusher and pusher-local: 250 ms, Sources/PusherLocal/WebhookBatcher.swift).
    public static let webhookBatchWindow: Duration = .milliseconds(250)

    /// The bridge's subscription to `channel` succeeded (also after a reconnect): from now on
    /// counts include the bridge.
    public mutating func subscriptionSucceeded(_ channel: String, now: Instant) {
        guard held[channel] != nil else { return }
        held[channel]?.confirmedAt = now
        held[channel]?.lastActivity = now
    }

    /// The server refused the subscription to `channel`: every rule lets go of it (a later poll
    /// may take it again).
    public mutating func subscriptionFailed(_ channel: String, now: Instant) -> [Action] {
        var actions: [Action] = []
        release(channel, reason: .refused, now: now, into: &actions)
        return actions
    }

    /// The Pusher connection dropped: subscriptions are gone until the client resubscribes, so
    /// counts no longer include the bridge until each succeeds again.
    public mutating func pusherDisconnected(now: Instant) {
        for channel in held.keys { held[channel]?.confirmedAt = nil }
    }

    /// An event arrived on `channel`: it is not idle.
    public mutating func eventReceived(on channel: String, now: Instant) {
        held[channel]?.lastActivity = now
    }

    // MARK: Taking and letting go

    /// `rule` takes `candidates` (name order) while it has room; the others are skipped, and
    /// counted when newly so. With `replacingSkipped` (a poll's full list), the skipped set becomes
    /// exactly those left over.
    mutating func take(_ candidates: [String], rule name: String, replacingSkipped: Bool, now: Instant, into actions: inout [Action]) {
        // Taken out while changed, so that its sets are not copied (thousands of channels).
        guard var state = states.removeValue(forKey: name) else { return }
        defer { states[name] = state }
        var leftOver = Set<String>()
        var newlySkipped: [String] = []
        for channel in candidates.sorted() where !state.held.contains(channel) {
            guard state.held.count < state.rule.settings.maxChannels else {
                if !state.skipped.contains(channel) { newlySkipped.append(channel) }
                leftOver.insert(channel)
                continue
            }
            state.held.insert(channel)
            state.skipped.remove(channel)
            actions.append(.joined(channel: channel, rule: name))
            if held[channel] != nil {
                held[channel]?.holders.append(name)
            } else {
                held[channel] = HeldChannel(holders: [name], since: now, lastActivity: now)
                actions.append(.subscribe(channel))
            }
            if let taken = held[channel] { noteIdleDeadline(of: taken) }
        }
        if replacingSkipped { state.skipped = leftOver } else { state.skipped.formUnion(leftOver) }
        if let first = newlySkipped.first {
            actions.append(.skipped(rule: name, count: newlySkipped.count, firstChannel: first))
        }
    }

    /// Every rule lets go of `channel`, which is unsubscribed; rules that had skipped channels
    /// take them now that there is room.
    mutating func release(_ channel: String, reason: LeaveReason, now: Instant, into actions: inout [Action]) {
        guard let current = held.removeValue(forKey: channel) else { return }
        for holder in current.holders {
            states[holder]?.held.remove(channel)
            actions.append(.left(channel: channel, rule: holder, reason: reason))
        }
        actions.append(.unsubscribe(channel))
        for name in order { states[name]?.skipped.remove(channel) }
        for holder in current.holders {
            guard let state = states[holder], !state.skipped.isEmpty else { continue }
            let room = state.rule.settings.maxChannels - state.held.count
            guard room > 0 else { continue }
            // Usually one place freed: the first skipped name, without sorting them all.
            let next = room == 1 ? state.skipped.min().map { [$0] } ?? [] : Array(state.skipped.sorted().prefix(room))
            take(next, rule: holder, replacingSkipped: false, now: now, into: &actions)
        }
    }

    /// `rule` alone lets go of `channel` (a reload); unsubscribed when no other rule holds it.
    mutating func drop(_ channel: String, from name: String, reason: LeaveReason, now: Instant, into actions: inout [Action]) {
        guard var current = held[channel], let index = current.holders.firstIndex(of: name) else { return }
        states[name]?.held.remove(channel)
        actions.append(.left(channel: channel, rule: name, reason: reason))
        current.holders.remove(at: index)
        if current.holders.isEmpty {
            held[channel] = nil
            actions.append(.unsubscribe(channel))
        } else {
            held[channel] = current
        }
    }
}
