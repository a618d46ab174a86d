import Backoff

/// Which channels the `channel_prefix` rules and mirrors of one bridge hold (docs/contract.md
/// §7.1), as a pure state machine: no I/O, no clock reads. The daemon tells it what happened — a
/// poll's answer or failure, a webhook, a subscription, an event, a reload, a timer — and carries
/// out the ``Action``s it returns, in order.
///
/// What it decides:
/// - **when to poll** each prefix: at start, then every `discovery_interval` after the last
///   answer; a failed poll (network, 5xx, 429) is retried after the reconnect backoff
///   (``ReconnectPolicy``); `channel_occupied` polls at once (one poll in flight per prefix: a
///   second request is made right after the first answers);
/// - **which channels to join**: those a poll lists with someone other than the bridge in them,
///   and those a `channel_occupied` webhook names, in name order, up to `max_channels` per rule;
///   the rest are skipped (counted once each while they stay skipped) and taken when room frees;
/// - **which to leave**: when the bridge is the only subscriber left — `subscription_count` ≤ 1
///   (or for presence a `user_count` of 1, the bridge's own identity) in a poll, a
///   `pusher:subscription_count` event or a `subscription_count` webhook; when a poll no longer
///   lists it (nobody there); without counts, after `idle_timeout` without an event; when its
///   subscription is refused; and on reload, the channels of removed or changed rules that no longer fit.
///
/// Each count is dated — a poll's by when its request went out, a webhook's by its `time_ms`
/// (less Pusher's batching), a `pusher:subscription_count` event's by its arrival, which follows
/// the bridge's own `subscription_succeeded` — and judged against when the bridge's subscription
/// took effect (``HeldChannel/confirmedAt``): taken after it, the count includes the bridge; taken
/// before it, it says nothing about whether the bridge is alone and never makes it leave; with no
/// subscription in effect, only 0 does. A channel joined after a poll went out is not judged by
/// that poll. A channel two prefixes take is subscribed once and left when the last lets go.
/// Channels configured exactly (`fixedChannels`) are never taken: they are subscribed anyway.
public struct ChannelDiscovery: Sendable {
    /// The clock of the daemon's timers.
    public typealias Instant = ContinuousClock.Instant

    /// Why a channel was left.
    public enum LeaveReason: String, Sendable, Equatable {
        /// The counts say the bridge is the only subscriber left.
        case alone
        /// A poll no longer lists it: nobody is there.
        case vacated
        /// No count was ever reported for it and it had no event for `idle_timeout`.
        case idle
        /// The server refused the subscription.
        case refused
        /// A reload removed the rule, or changed its prefix so the channel no longer fits.
        case ruleRemoved = "rule removed"
        /// A reload lowered `max_channels` below the number held.
        case overLimit = "over max_channels"
        /// A reload made it a configured channel: it stays subscribed, no longer discovered.
        case configured
    }

    /// A command for the daemon.
    public enum Action: Sendable, Equatable {
        /// Poll `GET /apps/ID/channels?filter_by_prefix=prefix&info=info` (no `info` when empty),
        /// then call ``pollSucceeded(rule:channels:now:)`` or ``pollFailed(rule:retryable:now:unitRandom:)``.
        case poll(rule: String, prefix: String, info: String)
        /// The server refused `info=subscription_count` for `rule`'s prefix: from now on it is
        /// polled without counts (log it; channels are then left after `idle_timeout` without events).
        case countsRefused(rule: String)
        /// Subscribe this channel (the first rule took it).
        case subscribe(String)
        /// Leave this channel (the last rule let it go).
        case unsubscribe(String)
        /// `rule` now holds `channel` (a presence mirror starts mirroring the room).
        case joined(channel: String, rule: String)
        /// `rule` let go of `channel` (a presence mirror clears the room's retained members and count).
        case left(channel: String, rule: String, reason: LeaveReason)
        /// `count` channels were newly skipped because `rule` holds `max_channels`; `firstChannel` is one of them.
        case skipped(rule: String, count: Int, firstChannel: String)
    }

    struct RuleState: Sendable {
        var rule: DiscoveryRule
        var held: Set<String> = []
        /// Seen occupied but not taken for lack of room.
        var skipped: Set<String> = []
        /// When to poll next; nil while a poll is in flight.
        var nextPoll: Instant?
        /// When the poll in flight went out.
        var pollStartedAt: Instant?
        /// Failed polls in a row (the backoff attempt).
        var failures = 0
        /// A `channel_occupied` arrived while a poll was in flight: poll again right after.
        var pollAgain = false
        /// The server refused `info=subscription_count` (hosted Pusher without subscription
        /// counting): polls go without counts, and `idle_timeout` decides when to leave.
        var countsRefused = false

        /// The `info` of the next poll: empty once counts were refused.
        var pollInfo: String { countsRefused ? "" : rule.pollInfo }
    }

    struct HeldChannel: Sendable {
        /// The rules holding it, in the order they took it.
        var holders: [String]
        /// When it was taken (subscribe sent).
        var since: Instant
        /// When its subscription succeeded; nil until then and after a disconnect.
        var confirmedAt: Instant?
        /// When it was taken, subscribed or last had an event.
        var lastActivity: Instant
        /// Whether any count was reported for it (idle tracking applies only without).
        var countsSeen = false
    }

    /// The reconnect backoff failed polls are retried with.
    public var backoff: ReconnectPolicy
    var order: [String]
    var states: [String: RuleState] = [:]
    var held: [String: HeldChannel] = [:]
    var fixed: Set<String>
    /// No channel's idle deadline is earlier than this (nil: no channel has one). Kept so that
    /// ``nextDeadline``, read after every event, is not a scan of every held channel: that made
    /// taking N channels O(N²) (Benchmarks/fleet/bench_fleet.py at 30,000: a third of the rate of
    /// 10,000). A deadline only moves later with activity, so the bound may be early: the timer
    /// then fires, ``deadlineReached(now:)`` scans and sets it exactly.
    var idleBound: Instant?

    /// A machine for `rules`, never taking `fixedChannels`. Nothing is polled before ``started(now:)``.
    public init(rules: [DiscoveryRule], fixedChannels: some Sequence<String> = [String](), backoff: ReconnectPolicy = .default) {
        self.backoff = backoff
        self.fixed = Set(fixedChannels)
        self.order = []
        for rule in rules where states[rule.name] == nil {
            order.append(rule.name)
            states[rule.name] = RuleState(rule: rule)
        }
    }

    // MARK: Queries

    /// The rules, in configuration order.
    public var rules: [DiscoveryRule] { order.compactMap { states[$0]?.rule } }

    /// How many channels `rule` holds (`pusher_mqtt_bridge_discovered_channels`).
    public func heldCount(rule: String) -> Int { states[rule]?.held.count ?? 0 }

    /// The channels `rule` holds, in name order.
    public func heldChannels(rule: String) -> [String] { states[rule]?.held.sorted() ?? [] }

    /// The channels `rule` skipped for lack of room and still remembers, in name order.
    public func skippedChannels(rule: String) -> [String] { states[rule]?.skipped.sorted() ?? [] }

    /// Every channel held by some rule, in name order: what a resubscription must include.
    public var heldChannels: [String] { held.keys.sorted() }

    /// Whether some rule holds `channel`.
    public func holds(_ channel: String) -> Bool { held[channel] != nil }

    /// The rules holding `channel`, in the order they took it.
    public func holders(of channel: String) -> [String] { held[channel]?.holders ?? [] }

    /// When ``deadlineReached(now:)`` has something to do: the next poll, or the first idle
    /// channel's `idle_timeout`. Nil when nothing is scheduled. Costs a pass over the held channels.
    public var nextDeadline: Instant? {
        var next: Instant?
        func consider(_ instant: Instant) { next = next.map { min($0, instant) } ?? instant }
        for state in states.values { if let poll = state.nextPoll { consider(poll) } }
        if let idleBound { consider(idleBound) }
        return next
    }

    /// `channel` was taken, or gained a holder (whose `idle_timeout` may be shorter): the bound
    /// takes its idle deadline in.
    mutating func noteIdleDeadline(of channel: HeldChannel) {
        guard !channel.countsSeen, let timeout = idleTimeout(channel) else { return }
        let deadline = channel.lastActivity.advanced(by: timeout)
        idleBound = idleBound.map { min($0, deadline) } ?? deadline
    }

    func idleTimeout(_ channel: HeldChannel) -> Duration? {
        channel.holders.compactMap { states[$0]?.rule.settings.idleTimeout }.min()
    }

    // MARK: Start, timer, reload

    /// The bridge started: poll every prefix now.
    public mutating func started(now: Instant) -> [Action] {
        for name in order { states[name]?.nextPoll = now }
        return deadlineReached(now: now)
    }

    /// The timer set for ``nextDeadline`` fired: polls that are due go out, channels idle for
    /// `idle_timeout` (those without counts) are left.
    public mutating func deadlineReached(now: Instant) -> [Action] {
        var actions: [Action] = []
        for name in order {
            guard let due = states[name]?.nextPoll, due <= now else { continue }
            startPoll(name, now: now, into: &actions)
        }
        var idle: [String] = []
        idleBound = nil
        for (name, channel) in held where !channel.countsSeen {
            guard let timeout = idleTimeout(channel) else { continue }
            let deadline = channel.lastActivity.advanced(by: timeout)
            if deadline <= now {
                idle.append(name)
            } else {
                idleBound = idleBound.map { min($0, deadline) } ?? deadline
            }
        }
        // Releasing may take skipped channels (noteIdleDeadline adds them to the bound).
        for name in idle.sorted() { release(name, reason: .idle, now: now, into: &actions) }
        return actions
    }

    /// A reload: rules are matched by name. Removed rules let go of their channels; changed ones
    /// keep what still fits (prefix, `max_channels`) and poll at once; new ones poll at once;
    /// unchanged ones keep everything, schedule included. Channels now configured exactly are no
    /// longer discovered (and stay subscribed).
    public mutating func rulesReplaced(by rules: [DiscoveryRule], fixedChannels: some Sequence<String>, now: Instant) -> [Action] {
        var actions: [Action] = []
        var incoming: [String: DiscoveryRule] = [:]
        var newOrder: [String] = []
        for rule in rules where incoming[rule.name] == nil {
            incoming[rule.name] = rule
            newOrder.append(rule.name)
        }
        for name in order where incoming[name] == nil {
            for channel in heldChannels(rule: name) { drop(channel, from: name, reason: .ruleRemoved, now: now, into: &actions) }
            states[name] = nil
        }
        order = newOrder
        fixed = Set(fixedChannels)
        for channel in held.keys.sorted() where fixed.contains(channel) {
            for holder in held[channel]?.holders ?? [] {
                states[holder]?.held.remove(channel)
                actions.append(.left(channel: channel, rule: holder, reason: .configured))
            }
            held[channel] = nil
        }
        for name in newOrder {
            guard let rule = incoming[name] else { continue }
            guard var state = states[name] else {
                states[name] = RuleState(rule: rule, nextPoll: now)
                continue
            }
            guard state.rule != rule else { continue }
            state.rule = rule
            state.skipped = state.skipped.filter { rule.takes($0) && !fixed.contains($0) }
            if state.pollStartedAt == nil { state.nextPoll = now } else { state.pollAgain = true }
            states[name] = state
            for channel in state.held.sorted() where !rule.takes(channel) {
                drop(channel, from: name, reason: .ruleRemoved, now: now, into: &actions)
            }
            for channel in heldChannels(rule: name).dropFirst(rule.settings.maxChannels) {
                drop(channel, from: name, reason: .overLimit, now: now, into: &actions)
            }
        }
        actions += deadlineReached(now: now)
        return actions
    }

    mutating func startPoll(_ name: String, now: Instant, into actions: inout [Action]) {
        guard var state = states[name] else { return }
        state.nextPoll = nil
        state.pollStartedAt = now
        state.pollAgain = false
        states[name] = state
        actions.append(.poll(rule: name, prefix: state.rule.prefix, info: state.pollInfo))
    }
}
