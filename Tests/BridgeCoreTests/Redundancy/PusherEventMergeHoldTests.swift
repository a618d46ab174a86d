import TestSupport
import Testing

@testable import BridgeCore

/// The join hold (docs/pusher-merge.md, "Order after a join") on a manual clock: a connection that
/// has just become live beside an established one is first with an event the established one has
/// not delivered an earlier event than yet. Found by the fault row `redundant-close-one`: 25
/// events out of order in 59 closes without it.
@Suite struct PusherEventMergeHoldTests {
    typealias Verdict = PusherEventMerge.Verdict

    /// A merge with the bridge's limits, connection 0 established on "c", and what went out in
    /// order (held events when released).
    struct Rig {
        var merge = PusherEventMerge(connections: 2, limits: .bridge)
        var clock = ManualClock()
        var out: [String] = []
        var held: [String] = []

        init() { merge.connectionLive(0, channel: "c", now: clock.now) }

        @discardableResult
        mutating func deliver(_ connection: Int, _ label: String) -> Verdict {
            let verdict = merge.event(
                connection: connection, channel: "c", key: PusherEventKey(name: "e", data: label, userID: nil), now: clock.now)
            takeReleased()
            if verdict == .publish { out.append(label) }
            if verdict == .held { held.append(label) }
            return verdict
        }

        mutating func takeReleased() {
            for channel in merge.takeReleased() where channel == "c" {
                out += held
                held = []
            }
        }

        mutating func advance(_ milliseconds: Int64) { clock.advance(.milliseconds(milliseconds)) }
    }

    @Test func aJoinerAheadOfTheEstablishedConnectionWaitsForItAndTheOrderHolds() {
        // Expected: 0 delivered e1; 1 joins; 1 is first with e2, e3 (held); 0 delivers e2's copy:
        // e2 and e3 go out, after e1. Then 1 is in step: its e4 goes out at once.
        var rig = Rig()
        rig.deliver(0, "e1")
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        rig.advance(1)
        #expect(rig.deliver(1, "e2") == .held)
        #expect(rig.deliver(1, "e3") == .held)
        #expect(rig.out == ["e1"])
        rig.advance(5)
        #expect(rig.deliver(0, "e2") == .duplicate)
        #expect(rig.out == ["e1", "e2", "e3"])
        #expect(rig.deliver(0, "e3") == .duplicate)
        #expect(rig.deliver(1, "e4") == .publish)
        #expect(rig.deliver(0, "e4") == .duplicate)
        #expect(rig.out == ["e1", "e2", "e3", "e4"])
        #expect(rig.merge.counters.held == 2 && rig.merge.counters.heldReleasedByTime == 0)
    }

    @Test func theEstablishedConnectionsLateEarlierEventGoesFirst() {
        // Expected: the case the hold is for: 1 is first with e2 while 0 has not delivered e1 yet;
        // e1 (from 0) goes out before e2.
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        #expect(rig.deliver(1, "e2") == .held)
        #expect(rig.deliver(0, "e1") == .publish)
        #expect(rig.deliver(0, "e2") == .duplicate)
        #expect(rig.out == ["e1", "e2"])
    }

    @Test func aJoinerBehindTheEstablishedConnectionIsNeverHeld() {
        // Expected: 1's first event is a copy of one 0 published: no hold from then on.
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        rig.deliver(0, "e1")
        #expect(rig.deliver(1, "e1") == .duplicate)
        #expect(rig.deliver(1, "e2") == .publish)
        #expect(rig.merge.counters.held == 0)
    }

    @Test func theHeldEventsGoOutWhenTheEstablishedConnectionGoesDown() {
        // Expected: 0 goes down while 1's e2 is held: e2 goes out at once, nothing lost.
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        #expect(rig.deliver(1, "e2") == .held)
        rig.merge.connectionDown(0)
        rig.takeReleased()
        #expect(rig.out == ["e2"])
        #expect(rig.deliver(1, "e3") == .publish)
        #expect(rig.out == ["e2", "e3"])
    }

    @Test func aStalledEstablishedConnectionHoldsTheJoinerForTheJoinHoldAtMost() {
        // Expected: 0 delivers nothing (stalled); 1's e2, e3 are held; 999 ms later still held;
        // at 1 s the next event (or housekeeping's expire) releases them, in order, then e4.
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        #expect(rig.deliver(1, "e2") == .held)
        rig.advance(10)
        #expect(rig.deliver(1, "e3") == .held)
        rig.advance(989)
        rig.merge.expire(now: rig.clock.now)
        rig.takeReleased()
        #expect(rig.out.isEmpty)
        rig.advance(1)
        #expect(rig.deliver(1, "e4") == .publish)
        #expect(rig.out == ["e2", "e3", "e4"])
        #expect(rig.merge.counters.heldReleasedByTime == 2)
        // The stalled connection's copies, later, are duplicates.
        #expect(rig.deliver(0, "e2") == .duplicate)
        #expect(rig.deliver(0, "e3") == .duplicate)
        #expect(rig.deliver(0, "e4") == .duplicate)
    }

    @Test func housekeepingEndsAHoldInAQuietChannel() {
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        #expect(rig.deliver(1, "only") == .held)
        rig.advance(1000)
        rig.merge.expire(now: rig.clock.now)
        rig.takeReleased()
        #expect(rig.out == ["only"])
    }

    @Test func aJoinLongerAgoThanTheJoinHoldHoldsNothing() {
        // Expected: 1 joined 1 s ago and has been quiet: its first event goes out at once.
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        rig.advance(1000)
        #expect(rig.deliver(1, "e1") == .publish)
    }

    @Test func afterAGapTheFirstConnectionBackIsNotHeld() {
        // Expected: nobody else live: nothing to wait for.
        var merge = PusherEventMerge(connections: 2, limits: .bridge)
        let clock = ManualClock()
        merge.connectionLive(1, channel: "c", now: clock.now)
        #expect(
            merge.event(connection: 1, channel: "c", key: PusherEventKey(name: "e", data: "x", userID: nil), now: clock.now) == .publish)
    }

    @Test func heldEventsOfAChannelLeftGoOut() {
        var rig = Rig()
        rig.merge.connectionLive(1, channel: "c", now: rig.clock.now)
        #expect(rig.deliver(1, "e2") == .held)
        rig.merge.channelLeft("c")
        rig.takeReleased()
        #expect(rig.out == ["e2"])
    }

    @Test func theSetHandsOutHeldEventsInOrderBeforeTheEventThatReleasedThem() {
        // Expected through PusherConnectionSet.deliver: what to publish, in order, with each call.
        var set = PusherConnectionSet(connections: 2)
        let clock = ManualClock()
        let now = PusherConnectionSet.Now(clock.now, wall: UTCTimestamp(millisecondsSince1970: 1_790_000_000_000))
        for connection in 0..<2 {
            _ = set.connectionChanged(connection, to: "connected", connected: true, socketID: "\(connection).1", now: now)
        }
        _ = set.subscribed("c", connection: 0, now: now)
        _ = set.subscribed("c", connection: 1, now: now)
        func event(_ label: String) -> PusherConnectionSet.ArrivedEvent {
            .init(name: "e", data: label, userID: nil, receivedAt: now.wall)
        }
        let first = set.deliver(event("e2"), channel: "c", connection: 1, now: now)
        #expect(first.verdict == .held && first.publish.isEmpty)
        let second = set.deliver(event("e1"), channel: "c", connection: 0, now: now)
        #expect(second.publish.map(\.event.data) == ["e1"])
        let third = set.deliver(event("e2"), channel: "c", connection: 0, now: now)
        #expect(third.verdict == .duplicate && third.publish.map(\.event.data) == ["e2"])
    }
}
