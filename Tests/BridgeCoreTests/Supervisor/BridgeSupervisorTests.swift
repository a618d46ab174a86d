import MQTTVocabulary
import Testing

@testable import BridgeCore

/// The supervisor's decisions that the daemon's runtime made by hand before: configured channels
/// alone and in a cluster, discovery's polls, deadlines and rate-limited logs, the cluster's
/// membership messages, held-report coalescing and discovered lists — on a manual clock (every
/// event takes its instant; nothing sleeps).
@Suite struct BridgeSupervisorTests {
    typealias Action = BridgeSupervisor.Action
    let t0 = ContinuousClock.now

    static let rules = """
        [[bridge.rule]]
        name = "devices"
        from = "pusher"
        channel_prefix = "private-device-"
        topic = "fleet/{suffix}"
        discovery_interval = "30s"
        [[bridge.rule]]
        name = "exact"
        from = "pusher"
        channel = "orders"
        topic = "orders"
        [[bridge.presence]]
        channel_prefix = "presence-room-"
        topic = "rooms/{suffix}"
        """

    static let cluster = """
        [bridge.cluster]
        group = "factory"
        instance = "a"
        heartbeat_interval = "1s"
        member_timeout = "3s"
        join_settle = "2s"
        """

    static func supervisor(clustered: Bool = false) throws -> BridgeSupervisor {
        let settings = try Fixture.parse(Fixture.config(extra: rules + "\n" + (clustered ? cluster : ""))).bridges[0]
        return BridgeSupervisor(settings: settings, incarnation: "0123456789abcdef", startedAt: 1_700_000_000_000)
    }

    func at(_ offset: Duration) -> BridgeSupervisor.Now {
        BridgeSupervisor.Now(t0 + offset, millis: 1_700_000_000_000 + Int64(offset.components.seconds * 1000))
    }

    static func polls(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .poll(let rule, _, _) = $0 { rule } else { nil } }
    }

    static func subscribed(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .subscribeChannel(let channel) = $0 { channel } else { nil } }
    }

    static func membershipTopics(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .publishMembership(let publish) = $0 { publish.topic } else { nil } }
    }

    // MARK: Alone

    @Test func aloneTheConfiguredChannelsAreSubscribedAndDiscoveryPollsAtOnce() throws {
        var supervisor = try Self.supervisor()
        let started = supervisor.started(at(.zero))
        #expect(Self.subscribed(started) == ["orders"])
        #expect(Self.polls(started) == ["devices", "presence:presence-room-"])
        #expect(!started.contains(.subscribeMembership(filter: "pusher-mqtt-bridge/cluster/factory/+/+")))
        // Polls in flight: nothing is timed until they answer.
        #expect(supervisor.nextDeadline == nil)
        let polls = supervisor.pollStarting(rule: "devices", at(.zero))
        #expect(polls, "alone every rule is polled here")
        let answered = supervisor.pollSucceeded(
            rule: "devices", prefix: "private-device-", channels: [OccupiedChannel("private-device-1", count: 2)], at(.seconds(1)))
        #expect(Self.subscribed(answered) == ["private-device-1"])
        #expect(answered.contains(.discoveryJoined(channel: "private-device-1", rule: "devices")))
        #expect(answered.contains(.discoveredChannels(rule: "devices", count: 1)))
        // The next poll is the machine's deadline; the runtime's timer sleeps until it, then ticks.
        #expect(supervisor.nextDeadline == t0 + .seconds(31))
        #expect(supervisor.tick(at(.seconds(30))).isEmpty, "nothing is due before the deadline")
        #expect(Self.polls(supervisor.tick(at(.seconds(31)))) == ["devices"])
    }

    @Test func aFailedPollIsRetriedAtTheMachinesDeadlineAndLoggedAtMostSixTimesAMinute() throws {
        var supervisor = try Self.supervisor()
        _ = supervisor.started(at(.zero))
        var logged = 0
        var suppressedAtTheEnd: Int?
        for second in 0..<8 {
            let failed = supervisor.pollFailed(
                rule: "devices", prefix: "private-device-", error: "refused", retryable: true, unitRandom: 0.5, at(.seconds(second)))
            for case .discoveryPollFailed(_, _, _, _, let suppressed) in failed {
                if let suppressed {
                    logged += 1
                    suppressedAtTheEnd = suppressed
                }
            }
            // Retried with backoff: the retry is a deadline, not a sleep inside the poll.
            let retry = try #require(supervisor.nextDeadline)
            #expect(retry > t0 + .seconds(second))
            _ = supervisor.tick(BridgeSupervisor.Now(retry, millis: 0))
        }
        #expect(logged == 6)
        #expect(suppressedAtTheEnd == 0)
        let later = supervisor.pollFailed(
            rule: "devices", prefix: "private-device-", error: "refused", retryable: true, at(.seconds(61)))
        #expect(
            later.first
                == .discoveryPollFailed(rule: "devices", prefix: "private-device-", error: "refused", retryable: true, suppressedLogs: 2))
    }

    // MARK: In a cluster

    /// Connected alone in its group, past the observation: the member holds everything.
    func activeMember() throws -> BridgeSupervisor {
        var supervisor = try Self.supervisor(clustered: true)
        let started = supervisor.started(at(.zero))
        #expect(Self.subscribed(started).isEmpty, "configured channels are wanted by the group, not subscribed")
        #expect(Self.polls(started) == ["devices", "presence:presence-room-"])
        let connected = supervisor.mqttConnectionChanged(to: "connected", connected: true, at(.zero))
        #expect(connected.contains(.subscribeMembership(filter: "pusher-mqtt-bridge/cluster/factory/#")))
        #expect(Self.subscribed(connected).isEmpty, "listening for the others first")
        Self.echoRecord(connected, to: &supervisor, at(.zero))
        return supervisor
    }

    /// Feeds the member's own record back as the broker does after a connect (it ends the observation on time).
    static func echoRecord(_ actions: [Action], to supervisor: inout BridgeSupervisor, _ now: BridgeSupervisor.Now) {
        for case .publishMembership(let publish) in actions where publish.topic.contains("/members/") {
            _ = supervisor.clusterMessageReceived(topic: publish.topic, payload: publish.payload, userProperties: [], now)
        }
    }

    @Test func inAClusterTheConfiguredChannelsAreTakenOnceTheObservationEnds() throws {
        var supervisor = try activeMember()
        var subscribed: [String] = []
        var now = Duration.zero
        // The runtime's timer: sleep until the deadline, tick, again.
        while now < .seconds(3), let deadline = supervisor.nextDeadline {
            now = t0.duration(to: deadline)
            subscribed += Self.subscribed(supervisor.tick(at(now)))
        }
        #expect(subscribed == ["orders"])
        #expect(supervisor.cluster?.membership.heldChannels == ["orders"])
    }

    @Test func heldReportsAreCoalescedForFiftyMilliseconds() throws {
        var supervisor = try activeMember()
        while let deadline = supervisor.nextDeadline, deadline <= t0 + .seconds(2) {
            _ = supervisor.tick(BridgeSupervisor.Now(deadline, millis: 0))
        }
        let heldTopic = "pusher-mqtt-bridge/cluster/factory/held/a"
        let start = Duration.seconds(2) + .milliseconds(100)
        _ = supervisor.pusherConnectionChanged(to: "connected", connected: true, wasConnected: false, socketID: "1.2", at(start))
        let first = supervisor.pusherSubscriptionSucceeded("orders", at(start))
        #expect(!Self.membershipTopics(first).contains(heldTopic), "not at once")
        #expect(supervisor.nextDeadline == t0 + start + SupervisedCluster.heldReportDelay)
        #expect(!Self.membershipTopics(supervisor.tick(at(start + .milliseconds(49)))).contains(heldTopic))
        let due = supervisor.tick(at(start + .milliseconds(50)))
        #expect(Self.membershipTopics(due).filter { $0 == heldTopic }.count == 1)
        #expect(!Self.membershipTopics(supervisor.tick(at(start + .milliseconds(100)))).contains(heldTopic), "published once")
    }

    @Test func membershipMessagesAreTakenFromTheRulesAndBadOnesLoggedAtMostSixTimesAMinute() throws {
        var supervisor = try activeMember()
        let marker = MQTTUserProperty("pusher-mqtt-bridge-cluster", "factory")
        #expect(supervisor.isClusterMessage(topic: "pusher-mqtt-bridge/cluster/factory/heartbeat/b", userProperties: []))
        #expect(supervisor.isClusterMessage(topic: "fleet/1", userProperties: [marker]), "an echo of a group member's publish")
        #expect(!supervisor.isClusterMessage(topic: "fleet/1", userProperties: []))
        #expect(
            supervisor.clusterMessageReceived(topic: "fleet/1", payload: [1], userProperties: [marker], at(.zero)) == [
                .clusterEchoSuppressed
            ])
        var logged = 0
        for _ in 0..<8 {
            let bad = supervisor.clusterMessageReceived(
                topic: "pusher-mqtt-bridge/cluster/factory/heartbeat/b", payload: Array("nonsense".utf8), userProperties: [],
                at(.seconds(1)))
            #expect(bad.count == 1)
            if case .clusterBadMessage(_, 8, let suppressed) = bad.first, suppressed != nil { logged += 1 }
        }
        #expect(logged == 6)
    }

    @Test func theGroupsDiscoveredListMakesItsChannelsWantedAndOnlyTheOwnerPublishesItsOwn() throws {
        var supervisor = try activeMember()
        while let deadline = supervisor.nextDeadline, deadline <= t0 + .seconds(2) {
            _ = supervisor.tick(BridgeSupervisor.Now(deadline, millis: 0))
        }
        let now = at(.seconds(2) + .milliseconds(10))
        // Alone in the group, this member owns every discovery rule: it polls them.
        let polls = supervisor.pollStarting(rule: "devices", now)
        #expect(polls)
        let polled = supervisor.pollSucceeded(
            rule: "devices", prefix: "private-device-", channels: [OccupiedChannel("private-device-7", count: 2)], now)
        #expect(Self.subscribed(polled).isEmpty, "the holder subscribes from the group's list")
        #expect(Self.membershipTopics(polled) == ["pusher-mqtt-bridge/cluster/factory/discovered/devices"])
        // The list comes back through the broker: now the group wants the channel, and this member holds it.
        let list = ClusterDiscoveredList(rule: "devices", channels: ["private-device-7"])
        let received = supervisor.clusterMessageReceived(
            topic: "pusher-mqtt-bridge/cluster/factory/discovered/devices", payload: list.payload, userProperties: [], now)
        #expect(Self.subscribed(received) == ["private-device-7"])
        // Same list as the group's: nothing to publish again.
        let again = supervisor.pollSucceeded(
            rule: "devices", prefix: "private-device-", channels: [OccupiedChannel("private-device-7", count: 2)], now)
        #expect(Self.membershipTopics(again).isEmpty)
        // A list for a rule this configuration lacks is ignored.
        let foreign = ClusterDiscoveredList(rule: "other", channels: ["x"])
        #expect(
            supervisor.clusterMessageReceived(
                topic: "pusher-mqtt-bridge/cluster/factory/discovered/other", payload: foreign.payload, userProperties: [], now
            ).isEmpty)
    }

    // MARK: Delivery, webhooks, stopping

    @Test func theDeliveryPauseChangesOnTheFirstRefusalAndTheFirstAcceptanceOnly() {
        var pause = DeliveryPause()
        #expect(pause.accepted(now: t0) == .none)
        #expect(pause.refused(reason: "403: over quota", now: t0) == .paused)
        #expect(pause.refused(reason: "403: app disabled", now: t0 + .seconds(1)) == .none)
        #expect(pause.reason == "403: app disabled", "the latest reason is shown")
        #expect(pause.accepted(now: t0 + .seconds(10)) == .resumed(after: .seconds(10)))
        #expect(!pause.isPaused)
        #expect(pause.accepted(now: t0 + .seconds(11)) == .none)
    }

    @Test func acceptedRequestsTakeTheirTurnsInTheOrderTheyWereDecided() {
        var turns = Turns()
        let first = turns.take()
        let second = turns.take()
        let third = turns.take()
        #expect(turns.current == first)
        #expect(turns.done() == second)
        #expect(turns.current != third)
        #expect(turns.done() == third)
    }

    @Test func stoppingHappensOnceAndTheHousekeepingIsDueEverySecond() throws {
        var supervisor = try Self.supervisor()
        #expect(!supervisor.isStopping)
        let first = supervisor.stopRequested()
        let second = supervisor.stopRequested()
        #expect(first)
        #expect(!second, "a second stop finds it stopping")
        #expect(supervisor.isStopping)
        let next = supervisor.housekept(now: t0)
        #expect(next == t0 + .seconds(1))
        #expect(supervisor.bridge.isResponsive(now: t0 + .milliseconds(500), within: .seconds(1)))
    }
}
