import Backoff
import Testing

@testable import BridgeCore

/// Issue 26, defect 3: a count taken before the bridge's own subscription took effect says nothing
/// about whether the bridge is alone (docs/contract.md §7.1), driven by a manual clock. The device
/// subscribes at `device`, alone: Pusher's `subscription_count` of 1 counts it only.
@Suite struct CountsTakenBeforeSubscribingTests {
    typealias Action = ChannelDiscovery.Action
    let t0 = ContinuousClock.now
    /// The Unix time, in ms, of `t0`.
    let t0Millis: Int64 = 1_700_000_000_000
    let channel = "private-device-c"

    static let devices = DiscoveryRule(
        name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(interval: .seconds(60)))

    /// The two orders Pusher may put the batch's events in.
    enum Order: String, CaseIterable, CustomTestStringConvertible {
        case occupiedFirst = "[channel_occupied, subscription_count 1]"
        case countFirst = "[subscription_count 1, channel_occupied]"
        var testDescription: String { rawValue }
    }

    /// A machine whose start-up poll found nothing.
    func machine() -> ChannelDiscovery {
        var machine = ChannelDiscovery(rules: [Self.devices])
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: [], now: t0)
        return machine
    }

    func millis(_ instant: ContinuousClock.Instant) -> Int64 {
        let (seconds, attoseconds) = t0.duration(to: instant).components
        return t0Millis + seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// The batch `[channel_occupied, subscription_count 1]` (in `order`) made at `made`, handled at `now`
    /// the way the daemon does (BridgeRuntime+Webhooks.swift).
    func handleBatch(_ order: Order, made: ContinuousClock.Instant, now: ContinuousClock.Instant, in machine: inout ChannelDiscovery)
        -> [Action]
    {
        let asOf = ChannelDiscovery.webhookCountAsOf(timeMillis: millis(made), nowMillis: millis(now), now: now)
        switch order {
        case .occupiedFirst:
            let occupied = machine.channelOccupied(channel, now: now)
            return occupied + machine.subscriptionCountChanged(channel, count: 1, asOf: asOf, now: now)
        case .countFirst:
            let count = machine.subscriptionCountChanged(channel, count: 1, asOf: asOf, now: now)
            return count + machine.channelOccupied(channel, now: now)
        }
    }

    static func leaves(_ actions: [Action]) -> [Action] {
        actions.filter {
            switch $0 {
            case .left, .unsubscribe: true
            default: false
            }
        }
    }

    @Test(arguments: Order.allCases)
    func aBatchHandledBeforeTheBridgesSubscriptionJoinsAndKeepsTheChannel(order: Order) {
        var machine = machine()
        let device = t0 + .seconds(10)
        // Pusher batches for up to 250 ms, then makes the request; it arrives 20 ms later.
        var actions = handleBatch(order, made: device + .milliseconds(250), now: device + .milliseconds(270), in: &machine)
        #expect(actions.contains(.subscribe(channel)))
        #expect(Self.leaves(actions).isEmpty)
        machine.subscriptionSucceeded(channel, now: device + .milliseconds(272))
        // Pusher then counts the bridge too (pusher:subscription_count, after subscription_succeeded).
        actions = machine.subscriptionCountChanged(channel, count: 2, now: device + .milliseconds(273))
        #expect(actions.isEmpty)
        #expect(machine.holds(channel))
    }

    @Test(arguments: Order.allCases)
    func aBatchHandledAfterTheBridgesSubscriptionKeepsTheChannel(order: Order) {
        var machine = machine()
        let device = t0 + .seconds(10)
        // The bridge took the channel earlier (another channel_occupied, or a poll), and its
        // subscription succeeded before this batch, made while the device was alone, is handled.
        _ = machine.channelOccupied(channel, now: device + .milliseconds(100))
        machine.subscriptionSucceeded(channel, now: device + .milliseconds(102))
        let actions = handleBatch(order, made: device + .milliseconds(250), now: device + .milliseconds(300), in: &machine)
        #expect(Self.leaves(actions).isEmpty)
        #expect(machine.holds(channel))
    }

    @Test func theSubscriptionSucceedingBetweenTheBatchsEventsKeepsTheChannel() {
        // The log of issue 26: joined from channel_occupied, `subscribed`, and 0–2 ms later the
        // batch's count of 1 (the device alone) is handled.
        var machine = machine()
        let device = t0 + .seconds(10)
        let made = device + .milliseconds(250)
        let received = device + .milliseconds(260)
        let asOf = ChannelDiscovery.webhookCountAsOf(timeMillis: millis(made), nowMillis: millis(received), now: received)
        #expect(machine.channelOccupied(channel, now: received).contains(.subscribe(channel)))
        machine.subscriptionSucceeded(channel, now: received + .milliseconds(1))
        let actions = machine.subscriptionCountChanged(channel, count: 1, asOf: asOf, now: received + .milliseconds(2))
        #expect(actions.isEmpty)
        #expect(machine.holds(channel))
    }

    @Test func aCountTakenAfterTheSubscriptionStillLeaves() {
        var machine = machine()
        _ = machine.channelOccupied(channel, now: t0 + .seconds(10))
        machine.subscriptionSucceeded(channel, now: t0 + .seconds(10.1))
        // The device went at t0 + 20 s; the webhook saying so was made 250 ms later.
        let made = t0 + .seconds(20.25)
        let now = t0 + .seconds(20.3)
        let asOf = ChannelDiscovery.webhookCountAsOf(timeMillis: millis(made), nowMillis: millis(now), now: now)
        let actions = machine.subscriptionCountChanged(channel, count: 1, asOf: asOf, now: now)
        #expect(actions == [.left(channel: channel, rule: "devices", reason: .alone), .unsubscribe(channel)])
    }

    @Test func aCountOfUnknownTimeNeverLeavesASubscribedChannel() {
        // A webhook without time_ms: when its count was taken is unknown.
        var machine = machine()
        _ = machine.channelOccupied(channel, now: t0 + .seconds(10))
        machine.subscriptionSucceeded(channel, now: t0 + .seconds(10.1))
        #expect(machine.subscriptionCountChanged(channel, count: 1, asOf: nil, now: t0 + .seconds(20)).isEmpty)
        #expect(machine.subscriptionCountChanged(channel, count: 0, asOf: nil, now: t0 + .seconds(20)).isEmpty)
        // Before the subscription succeeded, 0 is nobody at all, whenever it was counted.
        var fresh = self.machine()
        _ = fresh.channelOccupied(channel, now: t0 + .seconds(10))
        #expect(Self.leaves(fresh.subscriptionCountChanged(channel, count: 0, asOf: nil, now: t0 + .seconds(10))).count == 2)
    }

    @Test func aPollAnsweredJustBeforeTheSubscriptionKeepsTheChannel() {
        var machine = machine()
        let device = t0 + .seconds(10)
        // channel_occupied joins the channel and polls the prefix at once; the answer (the device
        // alone) comes back just before the bridge's subscription succeeds.
        let occupied = machine.channelOccupied(channel, now: device + .milliseconds(260))
        #expect(occupied.contains(.poll(rule: "devices", prefix: "private-device-", info: "subscription_count")))
        var actions = machine.pollSucceeded(
            rule: "devices", channels: [OccupiedChannel(channel, count: 1)], now: device + .milliseconds(262))
        #expect(actions.isEmpty)
        machine.subscriptionSucceeded(channel, now: device + .milliseconds(263))
        #expect(machine.subscriptionCountChanged(channel, count: 2, now: device + .milliseconds(264)).isEmpty)
        #expect(machine.holds(channel))
        // A poll sent after the subscription counts the bridge: 2 is the device and the bridge, 1 the bridge alone.
        _ = machine.deadlineReached(now: device + .seconds(61))
        #expect(machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel(channel, count: 2)], now: device + .seconds(61)).isEmpty)
        _ = machine.deadlineReached(now: device + .seconds(122))
        actions = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel(channel, count: 1)], now: device + .seconds(122))
        #expect(actions == [.left(channel: channel, rule: "devices", reason: .alone), .unsubscribe(channel)])
    }

    @Test(arguments: [1, 0])
    func aPollSentBeforeTheSubscriptionAndAnsweredAfterItKeepsTheChannel(count: Int) {
        var machine = machine()
        let device = t0 + .seconds(10)
        _ = machine.channelOccupied(channel, now: device + .milliseconds(260))
        machine.subscriptionSucceeded(channel, now: device + .milliseconds(263))
        // Counted before the bridge's subscription took effect: says nothing about now, whatever the count.
        let actions = machine.pollSucceeded(
            rule: "devices", channels: [OccupiedChannel(channel, count: count)], now: device + .milliseconds(265))
        #expect(Self.leaves(actions).isEmpty)
        #expect(machine.holds(channel))
    }

    @Test func aWebhooksTimeBecomesAnInstantOnTheDaemonsClock() {
        let now = t0 + .seconds(100)
        let nowMillis = millis(now)
        // 250 ms before the request was made (Pusher's batching), on the daemon's clock.
        #expect(ChannelDiscovery.webhookCountAsOf(timeMillis: nowMillis - 40, nowMillis: nowMillis, now: now) == now - .milliseconds(290))
        // A sender's clock ahead of ours: no later than the request's arrival, less the batching.
        #expect(
            ChannelDiscovery.webhookCountAsOf(timeMillis: nowMillis + 5_000, nowMillis: nowMillis, now: now) == now - .milliseconds(250))
        // Extreme values do not trap.
        #expect(ChannelDiscovery.webhookCountAsOf(timeMillis: .min, nowMillis: nowMillis, now: now) == now - .milliseconds(nowMillis + 250))
        #expect(ChannelDiscovery.webhookCountAsOf(timeMillis: .max, nowMillis: nowMillis, now: now) == now - .milliseconds(250))
        #expect(ChannelDiscovery.webhookCountAsOf(timeMillis: nil, nowMillis: nowMillis, now: now) == nil)
    }
}
