import Testing

@testable import BridgeCore

/// What a member tells the others so that events sent to Pusher do not come back (the holder's
/// `socket_id`), and what it does when another process takes its MQTT session (docs/contract.md §7.4).
@Suite struct ClusterLoopAndSessionTests {
    let t0 = ContinuousClock.now
    let settings = ClusterSettings(group: "factory", instance: "a", joinSettle: .zero)

    /// Member "a", active, with member "b" live from the start.
    func activeWithB() -> ClusterMembership {
        var member = ClusterMembership(settings: settings, incarnation: "ia", startedAt: 1)
        member.clientID = "bridge-a"
        _ = member.brokerConnected(now: t0)
        _ = member.memberRecordReceived(member.ownRecord, now: t0)  // the broker's echo of its record
        _ = member.memberRecordReceived(ClusterMemberRecord(instance: "b", incarnation: "ib", startedAt: 2), now: t0)
        _ = member.heartbeatReceived(ClusterHeartbeat(instance: "b", incarnation: "ib", sequence: 1), now: t0)
        _ = member.tick(now: t0 + .seconds(2))
        return member
    }

    @Test func heldReportsCarryTheSocketIDAndRoundTrip() {
        let report = ClusterHeldReport(instance: "a", incarnation: "x", channels: ["c1"], socketID: "123.456")
        let expected = #"{"instance":"a","incarnation":"x","seq":1,"socket_id":"123.456","part":1,"parts":1,"channels":["c1"]}"#
        #expect(String(decoding: report.payload, as: UTF8.self) == expected)
        #expect(ClusterHeldReport(payload: report.payload, instance: "a") == report)
        // An empty socket_id is none.
        let text = #"{"instance":"a","incarnation":"x","seq":1,"socket_id":"","part":1,"parts":1,"channels":[]}"#
        #expect(ClusterHeldReport(payload: Array(text.utf8), instance: "a")?.socketID == nil)
    }

    @Test func aNewSocketIDIsReportedAgain() {
        var member = activeWithB()
        let actions = member.pusherConnectionChanged(socketID: "1.1", now: t0 + .seconds(3))
        let held = actions.compactMap { if case .publishHeld(let report) = $0 { report } else { nil } }
        #expect(held.count == 1 && held.first?.socketID == "1.1")
        #expect(member.pusherConnectionChanged(socketID: "1.1", now: t0 + .seconds(3)).isEmpty, "unchanged: nothing to send")
        let down = member.pusherConnectionChanged(socketID: nil, now: t0 + .seconds(4))
        #expect(down.contains { if case .publishHeld(let report) = $0 { report.socketID == nil } else { false } })
    }

    @Test func theHoldersSocketIDIsKnownForItsChannelsOnly() {
        var member = activeWithB()
        let channels = (1...20).map { "ch-\($0)" }
        _ = member.channelsWanted(channels, now: t0 + .seconds(2))
        let ownedByB = channels.filter { member.owner(of: $0, now: t0 + .seconds(2)) == "b" }
        let ownedByA = channels.filter { member.owner(of: $0, now: t0 + .seconds(2)) == "a" }
        #expect(!ownedByB.isEmpty && !ownedByA.isEmpty)
        #expect(member.holderSocketID(of: ownedByB[0], now: t0 + .seconds(2)) == nil, "b reported no socket yet")
        _ = member.heldReported(
            ClusterHeldReport(instance: "b", incarnation: "ib", channels: ownedByB, socketID: "9.9"), now: t0 + .seconds(2))
        #expect(member.holderSocketID(of: ownedByB[0], now: t0 + .seconds(2)) == "9.9")
        #expect(member.holderSocketID(of: ownedByA[0], now: t0 + .seconds(2)) == nil, "a's own channel: its own socket_id")
        // A report from an earlier life of b is not believed (what b's current process said stands).
        _ = member.heldReported(
            ClusterHeldReport(instance: "b", incarnation: "old", channels: ownedByB, socketID: "1.0", sequence: 2), now: t0 + .seconds(2))
        #expect(member.holderSocketID(of: ownedByB[0], now: t0 + .seconds(2)) == "9.9")
    }

    @Test func aTakenSessionMakesTheMemberGiveWayForGood() {
        var member = activeWithB()
        _ = member.channelsWanted(["ch-1", "ch-2", "ch-3", "ch-4"], now: t0 + .seconds(2))
        let held = member.heldChannels
        let actions = member.sessionTakenOver(now: t0 + .seconds(3))
        #expect(actions.first == .report(.gaveWay(otherIncarnation: nil)))
        #expect(Set(actions.compactMap { if case .unsubscribeChannel(let c) = $0 { c } else { nil } }) == held)
        #expect(member.phase == .disconnected)
        #expect(member.readinessProblem?.hasPrefix("cluster instance a is also used by another live process with the same MQTT") == true)
        #expect(member.readinessProblem?.contains("with the same MQTT client id bridge-a, which takes") == true, "names the client id")
        #expect(member.brokerConnected(now: t0 + .seconds(5)).isEmpty, "it does not come back")
        #expect(member.phase == .disconnected)
        #expect(member.sessionTakenOver(now: t0 + .seconds(6)).isEmpty, "reported once")
    }

    /// The same file on two hosts: the same client id. The newer process's record reaches the older
    /// one (through the session they share, or live): the older gives way. Records of earlier
    /// incarnations (a restart) do not count.
    @Test func aNewerRecordUnderThisInstanceMakesTheOlderProcessGiveWay() {
        var member = activeWithB()
        let earlier = ClusterMemberRecord(instance: "a", incarnation: "i0", startedAt: 0, clientID: "bridge-a")
        #expect(member.memberRecordReceived(earlier, now: t0 + .seconds(2)).isEmpty)
        // Another client id: both can stay connected; the heartbeats report the duplicate, nobody gives way.
        let elsewhere = ClusterMemberRecord(instance: "a", incarnation: "i8", startedAt: 5, clientID: "other-a")
        #expect(member.memberRecordReceived(elsewhere, now: t0 + .seconds(2)).isEmpty)
        #expect(member.readinessProblem == nil)
        let newer = ClusterMemberRecord(instance: "a", incarnation: "i9", startedAt: 5, clientID: "bridge-a")
        #expect(ClusterMemberRecord(payload: newer.payload, instance: "a") == newer)
        let actions = member.memberRecordReceived(newer, now: t0 + .seconds(3))
        #expect(actions.first == .report(.gaveWay(otherIncarnation: "i9")))
        #expect(member.readinessProblem?.contains("(incarnation i9)") == true)
    }

    /// Two processes with one client id take the session from each other; the broker then publishes
    /// the Will of the one it disconnected, and the Will names its process. The older process gives
    /// way when a newer one's Will deletes its record; its own earlier lives' Wills do not count.
    @Test func aNewerProcesssWillOnThisInstanceMakesTheOlderGiveWay() {
        var member = activeWithB()
        #expect(member.memberRecordDeleted(instance: "a", byWillOf: nil, now: t0 + .seconds(2)).isEmpty)
        let ownEarlierLife = ClusterWillOrigin(incarnation: "i0", startedAt: 0)
        #expect(member.memberRecordDeleted(instance: "a", byWillOf: ownEarlierLife, now: t0 + .seconds(2)).isEmpty)
        let itself = ClusterWillOrigin(incarnation: "ia", startedAt: 1)
        #expect(member.memberRecordDeleted(instance: "a", byWillOf: itself, now: t0 + .seconds(2)).isEmpty)
        #expect(member.readinessProblem == nil)
        let newer = ClusterWillOrigin(incarnation: "i7", startedAt: 9)
        let actions = member.memberRecordDeleted(instance: "a", byWillOf: newer, now: t0 + .seconds(3))
        #expect(actions.first == .report(.gaveWay(otherIncarnation: "i7")))
        #expect(member.phase == .disconnected)
    }

    /// After a connect the observation lasts until the member's own record comes back: the broker
    /// sends it after whatever it had queued for the member (a kept session's backlog) and the
    /// retained records, so until then the member may not know the others. Found by the fleet
    /// bench: a member back with a long backlog took all 100,000 channels, counting itself alone.
    @Test func theObservationLastsUntilTheMembersOwnRecordComesBack() {
        let settings = ClusterSettings(group: "factory", instance: "a", joinSettle: .seconds(2))
        var member = ClusterMembership(settings: settings, incarnation: "ia", startedAt: 1)
        _ = member.channelsWanted(["orders"], now: t0)
        _ = member.brokerConnected(now: t0)
        let end = t0 + member.observation
        _ = member.tick(now: end + .seconds(1))
        #expect(member.heldChannels.isEmpty, "still listening: its backlog is unread")
        // The backlog named b (its record, no heartbeat yet); then its own record arrives: it waits
        // for b's heartbeat, queued behind the echo, before it counts anyone.
        let echo = end + .seconds(2)
        _ = member.memberRecordReceived(ClusterMemberRecord(instance: "b", incarnation: "ib", startedAt: 2), now: echo)
        #expect(member.memberRecordReceived(member.ownRecord, now: echo).isEmpty)
        #expect(member.phase != .active)
        #expect(!member.tick(now: echo + .milliseconds(10)).contains(.subscribeChannel("orders")), "waiting for b's heartbeat")
        #expect(member.phase != .active)
        // b's heartbeat: b is live, and the observation is over at the next tick (its clock end passed).
        _ = member.heartbeatReceived(ClusterHeartbeat(instance: "b", incarnation: "ib", sequence: 1), now: echo + .milliseconds(50))
        let actions = member.tick(now: echo + .milliseconds(50))
        #expect(member.phase == .active)
        let ownsOrders = RendezvousHash.owner(of: "orders", among: ["a", "b"]) == "a"
        #expect(actions.contains(.subscribeChannel("orders")) == ownsOrders)

        // A member known only by a stale record (no heartbeat ever): one observation after the echo.
        var stale = ClusterMembership(settings: settings, incarnation: "ia", startedAt: 1)
        _ = stale.channelsWanted(["orders"], now: t0)
        _ = stale.brokerConnected(now: t0)
        _ = stale.memberRecordReceived(ClusterMemberRecord(instance: "z", incarnation: "iz", startedAt: 3), now: echo)
        _ = stale.memberRecordReceived(stale.ownRecord, now: echo)
        #expect(!stale.tick(now: echo + stale.observation - .milliseconds(1)).contains(.subscribeChannel("orders")))
        #expect(stale.tick(now: echo + stale.observation).contains(.subscribeChannel("orders")))

        // A broker that never sends it back: the observation ends echoWait later all the same.
        var alone = ClusterMembership(settings: settings, incarnation: "ia", startedAt: 1)
        _ = alone.channelsWanted(["orders"], now: t0)
        _ = alone.brokerConnected(now: t0)
        let giveUp = t0 + alone.observation + alone.echoWait
        #expect(!alone.tick(now: giveUp - .milliseconds(1)).contains(.subscribeChannel("orders")))
        #expect(alone.phase != .active)
        #expect(alone.tick(now: giveUp).contains(.subscribeChannel("orders")))
    }

    /// While a newcomer still listens after its connect (its heartbeats say `"observing":1`), it
    /// holds nothing: the members handing it its share keep holding past the handover timeout until
    /// it takes them. Found by the fleet bench: a newcomer reading a long backlog for 10 s found its
    /// 20,000 channels dropped unconfirmed after 7 s, unheld until it took them.
    @Test func aHandoverToAMemberStillListeningWaitsForIt() throws {
        var simulation = ClusterSimulation()
        simulation.wanted = (0..<60).map { "ch-\($0)" }
        for instance in ["a", "b", "c"] { simulation.startNode(instance) }
        simulation.advance(until: { $0.isConverged }, limit: .seconds(10))
        simulation.resetStatistics()
        simulation.withheldEchoes = ["d"]
        simulation.startNode("d")
        let listening = simulation.settings.joinSettle + simulation.settings.handoverTimeout + .seconds(3)
        simulation.advance(by: listening)
        let d = try #require(simulation.nodes["d"])
        #expect(d.machine.phase != .active && d.subscribed.isEmpty, "d still listens")
        #expect(simulation.maxGap == .zero, "every channel held while d listens")
        simulation.returnEcho(to: "d")
        simulation.advance(until: { $0.isConverged }, limit: .seconds(20))
        #expect(simulation.nodes["d"]?.subscribed.isEmpty == false)
        #expect(simulation.maxGap == .zero)
        for id in ["a", "b", "c"] {
            for case .channelsHandedOver(let channels, confirmed: false) in simulation.nodes[id]?.events ?? [] {
                Issue.record("\(id) handed over unconfirmed: \(channels)")
            }
        }
    }
}
