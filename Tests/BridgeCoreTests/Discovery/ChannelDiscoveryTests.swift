import Backoff
import Testing

@testable import BridgeCore

/// ``ChannelDiscovery`` driven by a manual clock (docs/contract.md §7.1).
@Suite struct ChannelDiscoveryTests {
    typealias Action = ChannelDiscovery.Action
    let t0 = ContinuousClock.now

    static let devices = DiscoveryRule(
        name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(interval: .seconds(30)))
    static let rooms = DiscoveryRule(
        name: "presence:presence-room-", prefix: "presence-room-", settings: ChannelDiscoverySettings(interval: .seconds(10)),
        isPresenceMirror: true)
    static let noJitter = ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0)

    static func machine(_ rules: [DiscoveryRule] = [devices], fixed: [String] = []) -> ChannelDiscovery {
        ChannelDiscovery(rules: rules, fixedChannels: fixed, backoff: noJitter)
    }

    /// Subscribe actions in order.
    static func subscribed(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .subscribe(let channel) = $0 { channel } else { nil } }
    }

    /// Unsubscribe actions in order.
    static func unsubscribed(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .unsubscribe(let channel) = $0 { channel } else { nil } }
    }

    static func occupied(_ names: [String], count: Int? = 2) -> [OccupiedChannel] {
        names.map { OccupiedChannel($0, count: count) }
    }

    @Test func pollsEveryPrefixAtStartWithTheRightInfo() {
        var machine = Self.machine([Self.devices, Self.rooms])
        #expect(machine.nextDeadline == nil)
        let actions = machine.started(now: t0)
        #expect(
            actions == [
                .poll(rule: "devices", prefix: "private-device-", info: "subscription_count"),
                .poll(rule: "presence:presence-room-", prefix: "presence-room-", info: "user_count"),
            ])
        // In flight: nothing due until an answer.
        #expect(machine.nextDeadline == nil)
        #expect(machine.deadlineReached(now: t0 + .seconds(100)).isEmpty)
    }

    @Test func joinsListedChannelsInNameOrderAndPollsAgainAfterTheInterval() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        let actions = machine.pollSucceeded(
            rule: "devices",
            channels: [
                OccupiedChannel("private-device-002", count: 1), OccupiedChannel("private-device-001", count: nil),
                OccupiedChannel("private-device-003", count: 0), OccupiedChannel("private-other", count: 5),
                OccupiedChannel("private-device-", count: 3),
            ], now: t0 + .seconds(1))
        #expect(
            actions == [
                .joined(channel: "private-device-001", rule: "devices"), .subscribe("private-device-001"),
                .joined(channel: "private-device-002", rule: "devices"), .subscribe("private-device-002"),
            ])
        #expect(machine.heldCount(rule: "devices") == 2)
        #expect(machine.nextDeadline == t0 + .seconds(31))
        #expect(machine.deadlineReached(now: t0 + .seconds(30)).isEmpty)
        #expect(
            machine.deadlineReached(now: t0 + .seconds(31)) == [
                .poll(rule: "devices", prefix: "private-device-", info: "subscription_count")
            ])
    }

    @Test func leavesWhenAPollShowsOnlyTheBridge() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1", "private-device-2"]), now: t0)
        machine.subscriptionSucceeded("private-device-1", now: t0 + .seconds(1))
        // device-2's subscription has not succeeded yet: its count 1 is somebody else.
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        let actions = machine.pollSucceeded(
            rule: "devices", channels: Self.occupied(["private-device-1", "private-device-2"], count: 1), now: t0 + .seconds(31))
        #expect(actions == [.left(channel: "private-device-1", rule: "devices", reason: .alone), .unsubscribe("private-device-1")])
        #expect(machine.heldChannels(rule: "devices") == ["private-device-2"])
    }

    @Test func aSubscriptionConfirmedAfterThePollWentOutIsNotCountedInIt() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0)
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        machine.subscriptionSucceeded("private-device-1", now: t0 + .seconds(30.5))
        let actions = machine.pollSucceeded(
            rule: "devices", channels: Self.occupied(["private-device-1"], count: 1), now: t0 + .seconds(31))
        #expect(actions.isEmpty)
        #expect(machine.holds("private-device-1"))
    }

    @Test func leavesAChannelAPollNoLongerListsButNotOneTakenAfterTheRequest() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0)
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        // A webhook names device-2 while the poll is in flight.
        let occupied = machine.channelOccupied("private-device-2", now: t0 + .seconds(30.2))
        #expect(Self.subscribed(occupied) == ["private-device-2"])
        let actions = machine.pollSucceeded(rule: "devices", channels: [], now: t0 + .seconds(31))
        #expect(actions == [.left(channel: "private-device-1", rule: "devices", reason: .vacated), .unsubscribe("private-device-1")])
        #expect(machine.heldChannels(rule: "devices") == ["private-device-2"])
        // The webhook came during the poll: the prefix is polled again right away.
        #expect(machine.nextDeadline == t0 + .seconds(31))
    }

    @Test func subscriptionCountEventsAndWebhooksLeaveWhenOnlyTheBridgeIsLeft() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1", "private-device-2"]), now: t0)
        // Not yet confirmed: 1 is the other subscriber, 0 means nobody.
        #expect(machine.subscriptionCountChanged("private-device-1", count: 1, now: t0).isEmpty)
        #expect(Self.unsubscribed(machine.subscriptionCountChanged("private-device-2", count: 0, now: t0)) == ["private-device-2"])
        machine.subscriptionSucceeded("private-device-1", now: t0 + .seconds(1))
        #expect(machine.subscriptionCountChanged("private-device-1", count: 2, now: t0 + .seconds(2)).isEmpty)
        let actions = machine.subscriptionCountChanged("private-device-1", count: 1, now: t0 + .seconds(3))
        #expect(actions == [.left(channel: "private-device-1", rule: "devices", reason: .alone), .unsubscribe("private-device-1")])
        // A count for a channel nobody holds changes nothing.
        #expect(machine.subscriptionCountChanged("private-device-9", count: 0, now: t0 + .seconds(3)).isEmpty)
    }

    @Test func flappingCountsLeaveAndTheNextPollTakesTheChannelAgain() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        var now = t0
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: now)
        machine.subscriptionSucceeded("private-device-1", now: now + .seconds(1))
        var joins = 1
        var leaves = 0
        for round in 1...5 {
            // The other subscriber goes and comes back within the interval.
            leaves += Self.unsubscribed(machine.subscriptionCountChanged("private-device-1", count: 1, now: now + .seconds(5))).count
            #expect(machine.subscriptionCountChanged("private-device-1", count: 2, now: now + .seconds(6)).isEmpty)
            now = now + .seconds(30)
            #expect(machine.deadlineReached(now: now).count == 1, "round \(round)")
            joins +=
                Self.subscribed(machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"], count: 1), now: now))
                .count
            machine.subscriptionSucceeded("private-device-1", now: now + .seconds(1))
        }
        #expect(joins == 6)
        #expect(leaves == 5)
        #expect(machine.heldChannels(rule: "devices") == ["private-device-1"])
    }

    @Test func presenceRoomsCountTheBridgeAsOneUser() {
        var machine = Self.machine([Self.rooms])
        _ = machine.started(now: t0)
        let joined = machine.pollSucceeded(
            rule: Self.rooms.name, channels: [OccupiedChannel("presence-room-a", count: 1), OccupiedChannel("presence-room-b", count: 3)],
            now: t0)
        #expect(Self.subscribed(joined) == ["presence-room-a", "presence-room-b"])
        machine.subscriptionSucceeded("presence-room-a", now: t0 + .seconds(1))
        machine.subscriptionSucceeded("presence-room-b", now: t0 + .seconds(1))
        _ = machine.deadlineReached(now: t0 + .seconds(10))
        let actions = machine.pollSucceeded(
            rule: Self.rooms.name, channels: [OccupiedChannel("presence-room-a", count: 1), OccupiedChannel("presence-room-b", count: 2)],
            now: t0 + .seconds(10))
        #expect(actions == [.left(channel: "presence-room-a", rule: Self.rooms.name, reason: .alone), .unsubscribe("presence-room-a")])
    }

    @Test func failedPollsAreRetriedWithTheReconnectBackoffAndKeepHeldChannels() throws {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0)
        var now = t0 + .seconds(30)
        var delays: [Duration] = []
        for _ in 0..<6 {
            #expect(machine.deadlineReached(now: now).count == 1)
            #expect(machine.pollFailed(rule: "devices", retryable: true, now: now).isEmpty)
            let next = try #require(machine.nextDeadline)
            delays.append(now.duration(to: next))
            now = next
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)])
        #expect(machine.pollFailures(rule: "devices") == 6)
        #expect(machine.heldChannels(rule: "devices") == ["private-device-1"])
        // An answer resets the backoff.
        _ = machine.deadlineReached(now: now)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: now)
        #expect(machine.pollFailures(rule: "devices") == 0)
        #expect(machine.nextDeadline == now + .seconds(30))
        // A refusal (4xx) is not retried sooner than the interval (the first one of
        // info=subscription_count is: without counts, aRefusedSubscriptionCountFallsBackToPollingWithoutCounts).
        _ = machine.deadlineReached(now: now + .seconds(30))
        #expect(machine.pollFailed(rule: "devices", retryable: false, now: now + .seconds(30)) == [.countsRefused(rule: "devices")])
        _ = machine.deadlineReached(now: now + .seconds(30))
        #expect(machine.pollFailed(rule: "devices", retryable: false, now: now + .seconds(30)).isEmpty)
        #expect(machine.nextDeadline == now + .seconds(60))
        // Jitter comes from the caller.
        var jittered = ChannelDiscovery(rules: [Self.devices], backoff: ReconnectPolicy(initialDelay: .seconds(10), jitter: 0.2))
        _ = jittered.started(now: t0)
        _ = jittered.pollFailed(rule: "devices", retryable: true, now: t0, unitRandom: 1)
        #expect(jittered.nextDeadline == t0 + .seconds(12))
    }

    @Test func aRefusedSubscriptionCountFallsBackToPollingWithoutCounts() {
        var machine = Self.machine([Self.devices, Self.rooms])
        _ = machine.started(now: t0)
        // A 4xx for info=subscription_count: at once again, without info.
        #expect(machine.pollFailed(rule: "devices", retryable: false, now: t0 + .seconds(1)) == [.countsRefused(rule: "devices")])
        #expect(machine.nextDeadline == t0 + .seconds(1))
        #expect(machine.deadlineReached(now: t0 + .seconds(1)) == [.poll(rule: "devices", prefix: "private-device-", info: "")])
        _ = machine.pollSucceeded(rule: "devices", channels: [OccupiedChannel("private-device-1")], now: t0 + .seconds(2))
        #expect(machine.holds("private-device-1"))
        // Later refusals wait the interval, and stay without counts.
        _ = machine.deadlineReached(now: t0 + .seconds(32))
        #expect(machine.pollFailed(rule: "devices", retryable: false, now: t0 + .seconds(32)).isEmpty)
        #expect(machine.deadlineReached(now: t0 + .seconds(62)) == [.poll(rule: "devices", prefix: "private-device-", info: "")])
        // user_count is never given up: a refusal there waits the interval.
        #expect(machine.pollFailed(rule: Self.rooms.name, retryable: false, now: t0 + .seconds(1)).isEmpty)
        #expect(
            machine.deadlineReached(now: t0 + .seconds(11)).contains(
                .poll(rule: Self.rooms.name, prefix: "presence-room-", info: "user_count")))
    }

    @Test func answersForNoPollInFlightAreIgnored() {
        var machine = Self.machine()
        #expect(machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0).isEmpty)
        #expect(machine.pollFailed(rule: "devices", retryable: true, now: t0).isEmpty)
        #expect(machine.pollSucceeded(rule: "nobody", channels: [], now: t0).isEmpty)
        #expect(machine.nextDeadline == nil)
    }

    @Test func maxChannelsSkipsTheRestCountsThemOnceAndTakesThemWhenRoomFrees() {
        let rule = DiscoveryRule(name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(maxChannels: 3))
        var machine = Self.machine([rule])
        _ = machine.started(now: t0)
        let five = (1...5).map { "private-device-\($0)" }
        let first = machine.pollSucceeded(rule: "devices", channels: Self.occupied(five), now: t0)
        #expect(Self.subscribed(first) == Array(five.prefix(3)))
        #expect(first.last == .skipped(rule: "devices", count: 2, firstChannel: "private-device-4"))
        #expect(machine.skippedChannels(rule: "devices") == ["private-device-4", "private-device-5"])
        // The same list again: nothing new is skipped, nothing counted twice.
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        let second = machine.pollSucceeded(rule: "devices", channels: Self.occupied(five + ["private-device-6"]), now: t0 + .seconds(30))
        #expect(second == [.skipped(rule: "devices", count: 1, firstChannel: "private-device-6")])
        // Room frees: the first skipped channel is taken at once.
        machine.subscriptionSucceeded("private-device-2", now: t0 + .seconds(31))
        let freed = machine.subscriptionCountChanged("private-device-2", count: 1, now: t0 + .seconds(32))
        #expect(
            freed == [
                .left(channel: "private-device-2", rule: "devices", reason: .alone), .unsubscribe("private-device-2"),
                .joined(channel: "private-device-4", rule: "devices"), .subscribe("private-device-4"),
            ])
        #expect(machine.heldCount(rule: "devices") == 3)
        // A skipped channel that disappears from the list is forgotten.
        _ = machine.deadlineReached(now: t0 + .seconds(60))
        _ = machine.pollSucceeded(
            rule: "devices", channels: Self.occupied(["private-device-1", "private-device-3", "private-device-4"]), now: t0 + .seconds(60))
        #expect(machine.skippedChannels(rule: "devices").isEmpty)
    }

    @Test func channelOccupiedJoinsAndPollsAtOnce() {
        var machine = Self.machine([Self.devices, Self.rooms])
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: [], now: t0)
        let actions = machine.channelOccupied("private-device-7", now: t0 + .seconds(3))
        #expect(
            actions == [
                .joined(channel: "private-device-7", rule: "devices"), .subscribe("private-device-7"),
                .poll(rule: "devices", prefix: "private-device-", info: "subscription_count"),
            ])
        // Not under any prefix, configured, or not a channel name: nothing.
        #expect(machine.channelOccupied("private-other", now: t0).isEmpty)
        #expect(machine.channelOccupied("private-device-bad name", now: t0).isEmpty)
        var fixed = Self.machine(fixed: ["private-device-1"])
        _ = fixed.started(now: t0)
        #expect(fixed.channelOccupied("private-device-1", now: t0).isEmpty)
    }

    @Test func idleChannelsAreLeftOnlyWhenTheServerReportsNoCounts() {
        let rule = DiscoveryRule(
            name: "devices", prefix: "private-device-",
            settings: ChannelDiscoverySettings(interval: .seconds(30), idleTimeout: .seconds(600)))
        var machine = Self.machine([rule])
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(
            rule: "devices", channels: [OccupiedChannel("private-device-1"), OccupiedChannel("private-device-2")], now: t0)
        machine.subscriptionSucceeded("private-device-1", now: t0)
        machine.subscriptionSucceeded("private-device-2", now: t0)
        // Polls keep listing both (the bridge itself keeps them occupied) without counts.
        var now = t0
        for _ in 0..<10 {
            now = now + .seconds(30)
            _ = machine.deadlineReached(now: now)
            _ = machine.pollSucceeded(
                rule: "devices", channels: [OccupiedChannel("private-device-1"), OccupiedChannel("private-device-2")], now: now)
            machine.eventReceived(on: "private-device-2", now: now)
        }
        // device-1 had no event since t0: due at t0 + 600 s.
        #expect(machine.nextDeadline == t0 + .seconds(300 + 30))
        now = t0 + .seconds(600)
        let actions = machine.deadlineReached(now: now)
        #expect(actions.contains(.left(channel: "private-device-1", rule: "devices", reason: .idle)))
        #expect(machine.heldChannels(rule: "devices") == ["private-device-2"])
        // A channel with counts is never left for idleness.
        var counted = Self.machine([rule])
        _ = counted.started(now: t0)
        _ = counted.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0)
        _ = counted.deadlineReached(now: t0 + .seconds(30))
        _ = counted.pollFailed(rule: "devices", retryable: false, now: t0 + .seconds(30))
        #expect(Self.unsubscribed(counted.deadlineReached(now: t0 + .seconds(3600))).isEmpty)
        #expect(counted.holds("private-device-1"))
    }

    @Test func overlappingPrefixesSubscribeOnceAndLeaveWithTheLastHolder() {
        let narrow = DiscoveryRule(name: "narrow", prefix: "private-device-1")
        var machine = Self.machine([Self.devices, narrow])
        _ = machine.started(now: t0)
        let first = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-10"]), now: t0)
        let second = machine.pollSucceeded(rule: "narrow", channels: Self.occupied(["private-device-10"]), now: t0)
        #expect(Self.subscribed(first + second) == ["private-device-10"])
        #expect(machine.holders(of: "private-device-10") == ["devices", "narrow"])
        let reload = machine.rulesReplaced(by: [Self.devices], fixedChannels: [String](), now: t0 + .seconds(5))
        #expect(reload == [.left(channel: "private-device-10", rule: "narrow", reason: .ruleRemoved)])
        let gone = machine.rulesReplaced(by: [], fixedChannels: [String](), now: t0 + .seconds(6))
        #expect(gone == [.left(channel: "private-device-10", rule: "devices", reason: .ruleRemoved), .unsubscribe("private-device-10")])
        #expect(machine.nextDeadline == nil)
    }

    @Test func reloadKeepsUnchangedRulesAndRefitsChangedOnes() {
        let limited = DiscoveryRule(name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(maxChannels: 2))
        var machine = Self.machine([Self.devices, Self.rooms])
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(
            rule: "devices", channels: Self.occupied(["private-device-a1", "private-device-a2", "private-device-b1"]), now: t0)
        _ = machine.pollSucceeded(rule: Self.rooms.name, channels: Self.occupied(["presence-room-x"]), now: t0)
        let now = t0 + .seconds(5)
        // Unchanged: nothing happens, schedules stay.
        #expect(machine.rulesReplaced(by: [Self.devices, Self.rooms], fixedChannels: [String](), now: now).isEmpty)
        #expect(machine.nextDeadline == t0 + .seconds(10))
        // Fewer channels allowed: the last in name order go; the rule polls at once.
        let shrunk = machine.rulesReplaced(by: [limited, Self.rooms], fixedChannels: [String](), now: now)
        #expect(
            shrunk == [
                .left(channel: "private-device-b1", rule: "devices", reason: .overLimit), .unsubscribe("private-device-b1"),
                .poll(rule: "devices", prefix: "private-device-", info: "subscription_count"),
            ])
        #expect(machine.heldChannels(rule: Self.rooms.name) == ["presence-room-x"])
        // A new prefix: what no longer fits goes.
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-a1", "private-device-a2"]), now: now)
        let narrowed = DiscoveryRule(name: "devices", prefix: "private-device-a1")
        let changed = machine.rulesReplaced(by: [narrowed, Self.rooms], fixedChannels: [String](), now: now)
        #expect(Self.unsubscribed(changed) == ["private-device-a1", "private-device-a2"])
        // A channel that became configured stays subscribed and is no longer discovered.
        let configured = machine.rulesReplaced(by: [narrowed, Self.rooms], fixedChannels: ["presence-room-x"], now: now)
        #expect(configured == [.left(channel: "presence-room-x", rule: Self.rooms.name, reason: .configured)])
        #expect(machine.heldChannels.isEmpty)
        // A new rule polls at once.
        let added = machine.rulesReplaced(by: [narrowed, Self.rooms, Self.devices.renamed("more")], fixedChannels: [String](), now: now)
        #expect(added.contains(.poll(rule: "more", prefix: "private-device-", info: "subscription_count")))
    }

    @Test func configuredChannelsAreNeverTaken() {
        var machine = Self.machine(fixed: ["private-device-1"])
        _ = machine.started(now: t0)
        let actions = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1", "private-device-2"]), now: t0)
        #expect(Self.subscribed(actions) == ["private-device-2"])
    }

    @Test func aDisconnectMakesCountsExcludeTheBridgeUntilResubscribed() {
        var machine = Self.machine()
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1"]), now: t0)
        machine.subscriptionSucceeded("private-device-1", now: t0)
        machine.pusherDisconnected(now: t0 + .seconds(1))
        // While away, 1 is somebody else.
        #expect(machine.subscriptionCountChanged("private-device-1", count: 1, now: t0 + .seconds(2)).isEmpty)
        machine.subscriptionSucceeded("private-device-1", now: t0 + .seconds(3))
        #expect(
            Self.unsubscribed(machine.subscriptionCountChanged("private-device-1", count: 1, now: t0 + .seconds(4))) == ["private-device-1"]
        )
    }

    @Test func aRefusedSubscriptionIsLetGoAndRoomRefilled() {
        let rule = DiscoveryRule(name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(maxChannels: 1))
        var machine = Self.machine([rule])
        _ = machine.started(now: t0)
        _ = machine.pollSucceeded(rule: "devices", channels: Self.occupied(["private-device-1", "private-device-2"]), now: t0)
        let actions = machine.subscriptionFailed("private-device-1", now: t0 + .seconds(1))
        #expect(actions.first == .left(channel: "private-device-1", rule: "devices", reason: .refused))
        #expect(Self.subscribed(actions) == ["private-device-2"])
        #expect(machine.subscriptionFailed("private-device-9", now: t0).isEmpty)
    }

    @Test func tenThousandChannelsInOnePoll() {
        let rule = DiscoveryRule(name: "devices", prefix: "private-device-", settings: ChannelDiscoverySettings(maxChannels: 10_000))
        var machine = Self.machine([rule])
        _ = machine.started(now: t0)
        let names = (0..<12_000).map { "private-device-" + String(100_000 + $0) }
        let first = machine.pollSucceeded(rule: "devices", channels: Self.occupied(names), now: t0)
        #expect(Self.subscribed(first).count == 10_000)
        #expect(first.last == .skipped(rule: "devices", count: 2_000, firstChannel: "private-device-110000"))
        for name in names.prefix(10_000) { machine.subscriptionSucceeded(name, now: t0) }
        for name in names.prefix(10_000) { machine.eventReceived(on: name, now: t0 + .seconds(1)) }
        // Half the devices go: their channels are left, and 2,000 skipped ones are taken.
        _ = machine.deadlineReached(now: t0 + .seconds(30))
        let second = machine.pollSucceeded(
            rule: "devices", channels: Self.occupied(Array(names.suffix(6_000))) + Self.occupied(Array(names.prefix(6_000)), count: 1),
            now: t0 + .seconds(30))
        #expect(Self.unsubscribed(second).count == 6_000)
        #expect(machine.heldCount(rule: "devices") == 6_000)
        #expect(machine.skippedChannels(rule: "devices").isEmpty)
        #expect(machine.nextDeadline == t0 + .seconds(60))
    }

    @Test func discoveryRulesComeFromPrefixRulesAndMirrors() throws {
        let configuration = try Fixture.parse(
            Fixture.config(
                extra: """
                    [[bridge.rule]]
                    name = "devices"
                    from = "pusher"
                    channel_prefix = "private-device-"
                    topic = "fleet/{suffix}/{event}"
                    [[bridge.rule]]
                    name = "exact"
                    from = "pusher"
                    channel = "orders"
                    topic = "orders"
                    [[bridge.presence]]
                    channel_prefix = "presence-room-"
                    topic = "dash/rooms/{suffix}"
                    """))
        let rules = configuration.bridges[0].discoveryRules
        #expect(rules.map(\.name) == ["devices", "presence:presence-room-"])
        #expect(rules.map(\.pollInfo) == ["subscription_count", "user_count"])
        #expect(rules.map(\.isPresenceMirror) == [false, true])
        #expect(configuration.bridges[0].pusherChannels == ["orders"])
    }
}

extension DiscoveryRule {
    fileprivate func renamed(_ name: String) -> DiscoveryRule {
        var copy = self
        copy.name = name
        return copy
    }
}
