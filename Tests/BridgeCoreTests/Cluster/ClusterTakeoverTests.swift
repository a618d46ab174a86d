import MQTTVocabulary
import Testing

@testable import BridgeCore

/// How a member that takes a channel says how it was held before, so that the bridge reports the
/// gap a dead member left and none for a handover (docs/contract.md §8.1, "takeover gap"): through
/// ``ClusterSimulation`` (several members, one in-memory broker, a manual clock) and once through
/// the supervisor, which dates the gap on the wall clock.
@Suite struct ClusterTakeoverTests {
    static let channels = (1...30).map { "private-device-\($0)" }

    static func threeMembersConverged() -> ClusterSimulation {
        var simulation = ClusterSimulation()
        simulation.wanted = channels
        for instance in ["a", "b", "c"] { simulation.startNode(instance) }
        simulation.advance(until: { $0.isConverged }, limit: .seconds(10))
        return simulation
    }

    /// Every takeover the survivors recorded for `channels`, by channel.
    static func takeovers(of channels: Set<String>, in simulation: ClusterSimulation, by ids: [String]) -> [String: ClusterTakeover] {
        var found: [String: ClusterTakeover] = [:]
        for id in ids {
            for (channel, takeover) in simulation.nodes[id]?.takeovers ?? [:] where channels.contains(channel) {
                found[channel] = takeover
            }
        }
        return found
    }

    @Test func aFirstStartTakesEveryChannelWithoutATakeover() {
        // Expected: nobody held anything before: no member says how a channel was held (the
        // bridge's own restart record decides for each).
        let simulation = Self.threeMembersConverged()
        for id in ["a", "b", "c"] { #expect(simulation.nodes[id]?.takeovers.isEmpty == true) }
    }

    @Test func aKilledMembersChannelsAreTakenAfterALossSinceItWasLastHeardFrom() throws {
        // Expected: a's Will fires; b and c take each of a's channels with `afterLoss`, dated at a's
        // last heartbeat as each saw it: within one heartbeat interval (1 s) before the kill.
        var simulation = Self.threeMembersConverged()
        simulation.advance(by: .milliseconds(450))
        let orphaned = try #require(simulation.nodes["a"]).confirmed
        let killedAt = simulation.now
        simulation.kill("a")
        let found = Self.takeovers(of: orphaned, in: simulation, by: ["b", "c"])
        #expect(Set(found.keys) == orphaned)
        for (channel, takeover) in found {
            guard case .afterLoss(let lastHeard) = takeover else {
                Issue.record("\(channel): \(takeover), expected afterLoss")
                continue
            }
            #expect(lastHeard <= killedAt && killedAt - lastHeard <= .seconds(1), "\(channel): \(killedAt - lastHeard)")
        }
    }

    @Test func aHungMembersChannelsAreTakenAfterALossSinceItsLastHeartbeat() throws {
        // Expected: a freezes; after member_timeout (3 s) b and c take its channels with `afterLoss`
        // dated at a's last heartbeat, at or before the freeze.
        var simulation = Self.threeMembersConverged()
        let orphaned = try #require(simulation.nodes["a"]).confirmed
        let frozenAt = simulation.now
        simulation.freeze("a")
        simulation.advance(by: .seconds(4))
        let found = Self.takeovers(of: orphaned, in: simulation, by: ["b", "c"])
        #expect(Set(found.keys) == orphaned)
        for takeover in found.values {
            guard case .afterLoss(let lastHeard) = takeover else {
                Issue.record("\(takeover), expected afterLoss")
                continue
            }
            #expect(lastHeard <= frozenAt && frozenAt - lastHeard <= .seconds(1))
        }
    }

    @Test func aMemberLeavingOnSIGTERMHandsItsChannelsOver() throws {
        // Expected: a deletes its record itself (no Will) and keeps its channels until taken: b and
        // c take every one of them as a handover (no gap).
        var simulation = Self.threeMembersConverged()
        let leaving = try #require(simulation.nodes["a"]).confirmed
        simulation.terminate("a")
        simulation.advance(by: .seconds(6))
        let found = Self.takeovers(of: leaving, in: simulation, by: ["b", "c"])
        #expect(found.count == leaving.count)
        #expect(found.values.allSatisfy { $0 == .handover })
    }

    @Test func aJoiningMemberTakesItsShareAsAHandover() throws {
        // Expected: d joins a settled group; after join_settle it takes its share from the members
        // holding them: each a handover.
        var simulation = Self.threeMembersConverged()
        simulation.startNode("d")
        simulation.advance(by: .seconds(5))
        let taken = try #require(simulation.nodes["d"]).confirmed
        #expect(!taken.isEmpty)
        let found = Self.takeovers(of: taken, in: simulation, by: ["d"])
        #expect(found.count == taken.count)
        #expect(found.values.allSatisfy { $0 == .handover })
    }

    @Test func aKilledMemberRestartedTakesItsChannelsBackAsAHandover() throws {
        // Expected: a killed, then a new process of a joins: the channels it gets back are handed
        // over by b and c (their gap was reported once, by b and c, at the takeover).
        var simulation = Self.threeMembersConverged()
        let before = try #require(simulation.nodes["a"]).confirmed
        simulation.kill("a")
        simulation.advance(by: .seconds(1))
        simulation.startNode("a", id: "a2")
        simulation.advance(by: .seconds(6))
        let back = try #require(simulation.nodes["a2"]).confirmed
        #expect(back == before, "the hashing gives a the same channels")
        let found = Self.takeovers(of: back, in: simulation, by: ["a2"])
        #expect(found.count == back.count)
        #expect(found.values.allSatisfy { $0 == .handover })
    }

    @Test func theSupervisorDatesATakeoverOnTheWallClock() throws {
        // Expected: b (which the hashing gives "orders") was last heard from at 1.5 s; its Will
        // arrives at 2.4 s: the supervisor asks for "orders" with `channelTakenOver` dated
        // 1.5 s on the wall clock, before the subscription.
        var supervisor = try BridgeSupervisorTests.supervisor(clustered: true)
        let t0 = ContinuousClock.now
        let wall0: Int64 = 1_700_000_000_000
        func at(_ milliseconds: Int64) -> BridgeSupervisor.Now {
            BridgeSupervisor.Now(t0 + .milliseconds(milliseconds), millis: wall0 + milliseconds)
        }
        let other = try #require(
            (1...64).map { "m\($0)" }.first { RendezvousHash.owner(of: "orders", among: ["a", $0]) == $0 })
        let base = "pusher-mqtt-bridge/cluster/factory"
        _ = supervisor.started(at(0))
        BridgeSupervisorTests.echoRecord(supervisor.mqttConnectionChanged(to: "connected", connected: true, at(0)), to: &supervisor, at(0))
        let record = ClusterMemberRecord(instance: other, incarnation: "io", startedAt: 5)
        _ = supervisor.clusterMessageReceived(topic: "\(base)/members/\(other)", payload: record.payload, userProperties: [], at(500))
        let heartbeat = { (sequence: UInt64) in ClusterHeartbeat(instance: other, incarnation: "io", sequence: sequence).payload }
        _ = supervisor.clusterMessageReceived(topic: "\(base)/heartbeat/\(other)", payload: heartbeat(1), userProperties: [], at(500))
        let held = ClusterHeldReport(instance: other, incarnation: "io", channels: ["orders"])
        _ = supervisor.clusterMessageReceived(topic: "\(base)/held/\(other)", payload: held.payload, userProperties: [], at(1000))
        _ = supervisor.clusterMessageReceived(topic: "\(base)/heartbeat/\(other)", payload: heartbeat(2), userProperties: [], at(1500))
        var actions: [BridgeSupervisor.Action] = []
        while let deadline = supervisor.nextDeadline, deadline <= t0 + .milliseconds(2300) {
            let offset = t0.duration(to: deadline).components
            actions += supervisor.tick(
                BridgeSupervisor.Now(deadline, millis: wall0 + offset.seconds * 1000 + offset.attoseconds / 1_000_000_000_000_000))
        }
        #expect(BridgeSupervisorTests.subscribed(actions).isEmpty, "\(other) holds orders")
        let will = [MQTTUserProperty("incarnation", "io"), MQTTUserProperty("started_at", "5")]
        let died = supervisor.clusterMessageReceived(topic: "\(base)/members/\(other)", payload: [], userProperties: will, at(2400))
        let taken = died.filter {
            switch $0 {
            case .channelTakenOver, .subscribeChannel: true
            default: false
            }
        }
        #expect(
            taken == [
                .channelTakenOver("orders", lastHeldAt: UTCTimestamp(millisecondsSince1970: wall0 + 1500)), .subscribeChannel("orders"),
            ])
    }
}
