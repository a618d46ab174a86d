import Testing

@testable import BridgeCore

/// ``ClusterMembership`` driven through ``ClusterSimulation``: several members, one in-memory
/// broker, a manual clock (docs/contract.md §7.4).
@Suite struct ClusterMembershipTests {
    static let channels = (1...50).map { "private-device-\($0)" }

    /// Three members started together, settled.
    static func threeMembers() -> ClusterSimulation {
        var simulation = ClusterSimulation()
        simulation.wanted = channels
        for instance in ["a", "b", "c"] { simulation.startNode(instance) }
        return simulation
    }

    @Test func threeMembersConvergeOnADisjointCover() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged }, limit: .seconds(10))
        var union: Set<String> = []
        for id in ["a", "b", "c"] {
            let held = try #require(simulation.nodes[id]).confirmed
            #expect(union.isDisjoint(with: held))
            #expect(!held.isEmpty, "every member holds some of 50 channels")
            union.formUnion(held)
        }
        #expect(union == Set(Self.channels))
        // Nobody took a channel before the observation was over, so nothing moved twice.
        let subscribes = simulation.nodes.values.map(\.subscribeCount).reduce(0, +)
        #expect(subscribes == Self.channels.count)
        let discoveryOwners = ["devices", "rooms", "sensors"].map { rule in
            simulation.nodes.values.filter { $0.machine.isDiscoveryOwner(rule: rule, now: simulation.now) }.count
        }
        #expect(discoveryOwners == [1, 1, 1])
    }

    /// A broker that does not send a newcomer the retained records (ejabberd 23.01 across its nodes,
    /// docs/brokers.md): each member publishes its record again when it sees a new member's, so
    /// each newcomer learns the others within a heartbeat, inside its observation.
    @Test func membersJoiningOneByOneWithoutRetainedRecordsStillHoldEachChannelOnce() throws {
        var simulation = ClusterSimulation()
        simulation.retainedOnConnect = false
        simulation.wanted = Self.channels
        for instance in ["a", "b", "c"] {
            simulation.startNode(instance)
            simulation.resetStatistics()
            simulation.advance(until: { $0.isConverged }, limit: .seconds(10))
            #expect(simulation.maxDuplicate <= simulation.settings.handoverTimeout, "\(instance) joined")
        }
        for id in ["a", "b", "c"] {
            #expect(simulation.nodes[id]?.machine.liveMembers.count == 2, "\(id) sees the other two")
        }
        for channel in Self.channels { #expect(simulation.holders(of: channel).count == 1) }
    }

    @Test func aMemberWaitsForTheObservationBeforeTakingChannels() throws {
        var simulation = ClusterSimulation()
        simulation.wanted = Self.channels
        simulation.startNode("a")
        simulation.advance(by: .milliseconds(1900))
        #expect(simulation.nodes["a"]?.subscribed.isEmpty == true)
        #expect(simulation.nodes["a"]?.machine.readinessProblem == "cluster: listening for the other members before taking channels")
        simulation.advance(by: .milliseconds(200))
        #expect(simulation.nodes["a"]?.subscribed == Set(Self.channels))
    }

    @Test func aKilledMembersChannelsAreTakenAtOnce() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        let orphaned = try #require(simulation.nodes["a"]).confirmed
        simulation.kill("a")
        // The Will deleted the record: no settle, no timeout, subscribed in the same delivery.
        let taken = (simulation.nodes["b"]?.subscribed ?? []).union(simulation.nodes["c"]?.subscribed ?? [])
        #expect(orphaned.isSubset(of: taken))
        simulation.resetStatistics()
        simulation.advance(by: .milliseconds(300))
        #expect(simulation.isConverged)
        #expect(simulation.maxGap <= .milliseconds(300), "the gap is Pusher's confirmation only")
        #expect(simulation.offlinePublished.filter { $0.instance == "a" }.count == 1, "one survivor writes a's offline")
        #expect(simulation.nodes["b"]?.events.contains(.memberLeft(instance: "a")) == true)
        // Each survivor tells its discovery that a's channels had no holder: all of them, as it
        // held none of them itself.
        #expect(simulation.nodes["b"]?.holdersGone == orphaned && simulation.nodes["c"]?.holdersGone == orphaned)
    }

    @Test func aHungMembersChannelsAreTakenAfterTheMemberTimeout() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        let orphaned = try #require(simulation.nodes["a"]).confirmed
        simulation.freeze("a")
        simulation.resetStatistics()
        simulation.advance(by: .seconds(2))
        let early = (simulation.nodes["b"]?.subscribed ?? []).union(simulation.nodes["c"]?.subscribed ?? [])
        #expect(early.isDisjoint(with: orphaned), "not before member_timeout (3s) since the last heartbeat")
        simulation.advance(by: .seconds(2))
        let taken = (simulation.nodes["b"]?.confirmed ?? []).union(simulation.nodes["c"]?.confirmed ?? [])
        #expect(orphaned.isSubset(of: taken))
        #expect(simulation.maxGap <= .milliseconds(3300), "member_timeout plus Pusher's confirmation, within the 5 s of §7.4")
        #expect(simulation.nodes["b"]?.events.contains(.memberTimedOut(instance: "a")) == true)
        #expect(simulation.retained[simulation.settings.memberTopic("a")] != nil, "the record is still there")
        #expect(simulation.offlinePublished.filter { $0.instance == "a" }.count == 1)

        // SIGCONT: a notices it was frozen, releases everything, observes, and takes its share back.
        simulation.resetStatistics()
        simulation.thaw("a")
        #expect(simulation.nodes["a"]?.events.contains { if case .stalled = $0 { true } else { false } } == true)
        simulation.advance(until: { $0.isConverged })
        #expect(simulation.maxGap == .zero)
        #expect(simulation.maxDuplicate <= simulation.settings.handoverTimeout)
    }

    @Test func aPartitionedMemberReleasesAllAndRejoinsWithBoundedDuplicates() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        let held = try #require(simulation.nodes["a"]).confirmed.count
        simulation.disconnect("a", will: false)
        #expect(simulation.nodes["a"]?.subscribed.isEmpty == true)
        #expect(simulation.nodes["a"]?.events.last == .releasedAll(count: held))
        simulation.advance(by: .seconds(10))
        #expect(simulation.nodes["a"]?.machine.phase == .disconnected)
        #expect(simulation.isConverged, "b and c hold everything")
        for channel in Self.channels { #expect(simulation.holders(of: channel).count == 1) }

        simulation.resetStatistics()
        simulation.connect("a")
        // The broker publishes the old connection's Will after the new one took the session over.
        simulation.advance(by: .milliseconds(500))
        simulation.fireStaleWill(of: "a")
        simulation.advance(until: { $0.isConverged })
        #expect(simulation.maxGap == .zero)
        #expect(simulation.maxDuplicate <= simulation.settings.handoverTimeout)
        #expect(simulation.retained[simulation.settings.memberTopic("a")] != nil, "a put its record back")
    }

    @Test func aRollingRestartLeavesNoChannelUnheld() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        simulation.resetStatistics()
        for instance in ["a", "b", "c"] {
            simulation.terminate(instance)
            simulation.advance(until: { $0.nodes[instance]?.leaveCompleted == true }, limit: .seconds(6))
            #expect(simulation.retained[simulation.settings.memberTopic(instance)] == nil)
            simulation.advance(by: .seconds(1))
            simulation.startNode(instance)
            simulation.advance(until: { $0.isConverged })
            simulation.advance(by: .seconds(1))
        }
        #expect(simulation.maxGap == .zero, "every channel was held by at least one member at every step")
        #expect(simulation.maxDuplicate <= simulation.settings.handoverTimeout)
        let confirmedHandovers = simulation.nodes.values.flatMap(\.events).contains {
            if case .channelsHandedOver(_, confirmed: true) = $0 { true } else { false }
        }
        #expect(confirmedHandovers)
    }

    @Test func withoutAConfirmationAHandoverEndsAfterFiveSeconds() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        let handed = try #require(simulation.nodes["a"]).confirmed
        simulation.confirmDelay = .seconds(60)  // Pusher never confirms the takers' subscriptions in time
        simulation.terminate("a")
        simulation.advance(by: .milliseconds(4900))
        #expect(simulation.nodes["a"]?.subscribed == handed, "still held while the new holders have not reported")
        simulation.advance(by: .milliseconds(100))
        #expect(simulation.nodes["a"]?.leaveCompleted == true)
        #expect(simulation.nodes["a"]?.events.contains(.channelsHandedOver(handed.sorted(), confirmed: false)) == true)
    }

    @Test func theLastMemberLeavesAtOnce() {
        var simulation = ClusterSimulation()
        simulation.wanted = Self.channels
        simulation.startNode("a")
        simulation.advance(until: { $0.isConverged })
        simulation.terminate("a")
        #expect(simulation.nodes["a"]?.leaveCompleted == true, "nobody to hand over to")
    }

    @Test func aDuplicateInstanceIsReported() {
        var simulation = ClusterSimulation()
        simulation.wanted = Self.channels
        simulation.startNode("a", id: "a1")
        simulation.startNode("a", id: "a2")
        simulation.startNode("b")
        simulation.advance(by: .seconds(3))
        #expect(simulation.nodes["a1"]?.machine.isDuplicateInstance == true)
        #expect(simulation.nodes["a2"]?.machine.isDuplicateInstance == true)
        #expect(simulation.nodes["b"]?.machine.isDuplicateInstance == false)
        #expect(
            simulation.nodes["a1"]?.machine.readinessProblem?.contains("cluster instance a is also used by another live process") == true)
        #expect(simulation.nodes["b"]?.machine.readinessProblem == nil)
        #expect(simulation.nodes["a1"]?.events.contains(.duplicateInstance(otherIncarnation: "inc-2")) == true)
        // Its Will names no process: one naming a newer process of instance a would make a1 give
        // way (ClusterLoopAndSessionTests: the same client id taking a1's session).
        simulation.kill("a2", namingItself: false)
        simulation.advance(by: .seconds(4))
        #expect(simulation.nodes["a1"]?.machine.isDuplicateInstance == false)
        #expect(simulation.nodes["a1"]?.events.contains(.duplicateInstanceCleared) == true)
        #expect(simulation.nodes["a1"]?.machine.readinessProblem == nil)
        simulation.advance(until: { $0.isConverged }, limit: .seconds(30), "a1 put its record back after a2's Will deleted it")
    }

    @Test func aFlappingMemberMovesNothing() throws {
        var simulation = ClusterSimulation()
        simulation.wanted = Self.channels
        simulation.startNode("a")
        simulation.startNode("c")
        simulation.advance(until: { $0.isConverged })
        let before = ["a", "c"].map { (simulation.nodes[$0]?.subscribeCount ?? 0) + (simulation.nodes[$0]?.unsubscribeCount ?? 0) }
        for round in 0..<5 {
            simulation.startNode("b")
            simulation.advance(by: .seconds(1))
            if round.isMultiple(of: 2) { simulation.kill("b") } else { simulation.terminate("b") }
            simulation.advance(by: .seconds(1))
        }
        let after = ["a", "c"].map { (simulation.nodes[$0]?.subscribeCount ?? 0) + (simulation.nodes[$0]?.unsubscribeCount ?? 0) }
        #expect(before == after, "no channel bounced")
        // b stays: each of its channels moves once.
        simulation.startNode("b")
        simulation.advance(until: { $0.isConverged })
        let unsubscribes = ["a", "c"].map { simulation.nodes[$0]?.unsubscribeCount ?? 0 }.reduce(0, +)
        #expect(unsubscribes == simulation.nodes["b"]?.confirmed.count)
    }

    @Test func channelsFollowTheWantedList() throws {
        var simulation = Self.threeMembers()
        simulation.advance(until: { $0.isConverged })
        simulation.setWanted(Array(Self.channels.prefix(10)) + ["presence-room-1"])
        simulation.advance(by: .milliseconds(300))
        #expect(simulation.isConverged)
        let dropped = simulation.nodes.values.flatMap(\.events).contains { if case .channelsDropped = $0 { true } else { false } }
        #expect(dropped)
    }

    @Test func eventsBeforeAConnectionAndAfterLeavingDoNothing() {
        let settings = ClusterSettings(group: "g", instance: "a")
        let t0 = ContinuousClock().now
        var machine = ClusterMembership(settings: settings, incarnation: "x", startedAt: 0)
        #expect(machine.channelsWanted(["c1"], now: t0).isEmpty)
        #expect(machine.tick(now: t0 + .seconds(10)).isEmpty)
        #expect(machine.nextDeadline == nil)
        #expect(machine.leaveRequested(now: t0 + .seconds(11)) == [.leaveCompleted])
        #expect(machine.brokerConnected(now: t0 + .seconds(12)).isEmpty)
        #expect(machine.phase == .left)
    }

    @Test func theMachineAsksToBeTickedAtItsDeadlines() {
        let settings = ClusterSettings(group: "g", instance: "a")
        let t0 = ContinuousClock().now
        var machine = ClusterMembership(settings: settings, incarnation: "x", startedAt: 0)
        let actions = machine.brokerConnected(now: t0)
        #expect(actions.first == .publishRecord(ClusterMemberRecord(instance: "a", incarnation: "x", startedAt: 0)))
        #expect(actions.contains(.publishHeartbeat(ClusterHeartbeat(instance: "a", incarnation: "x", sequence: 1, observing: true))))
        #expect(machine.nextDeadline == t0 + .seconds(1))
        _ = machine.heartbeatReceived(ClusterHeartbeat(instance: "b", incarnation: "y", sequence: 1), now: t0 + .milliseconds(100))
        _ = machine.memberRecordReceived(ClusterMemberRecord(instance: "b", incarnation: "y", startedAt: 0), now: t0 + .milliseconds(200))
        #expect(machine.liveMembers == ["b"])
        // b's heartbeat expires at t0 + 3.1s, the next own heartbeat is due at t0 + 1s.
        #expect(machine.nextDeadline == t0 + .seconds(1))
        _ = machine.tick(now: t0 + .seconds(1))
        _ = machine.tick(now: t0 + .seconds(2))
        _ = machine.tick(now: t0 + .seconds(3))
        #expect(machine.nextDeadline == t0 + .milliseconds(3100))
        let expired = machine.tick(now: t0 + .milliseconds(3100))
        #expect(expired.contains(.report(.memberTimedOut(instance: "b"))))
        #expect(machine.liveMembers.isEmpty)
    }
}
