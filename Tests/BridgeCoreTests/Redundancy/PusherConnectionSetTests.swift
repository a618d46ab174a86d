import TestSupport
import Testing

@testable import BridgeCore

/// N Pusher connections seen as one by the bridge machine (docs/pusher-merge.md), on a manual
/// clock: the wall clock moves with the monotonic one.
@Suite struct PusherConnectionSetTests {
    struct Rig {
        var set: PusherConnectionSet
        var clock = ManualClock()
        var wall: Int64 = 1_790_000_000_000

        init(connections: Int) { set = PusherConnectionSet(connections: connections) }

        var now: PusherConnectionSet.Now { .init(clock.now, wall: UTCTimestamp(millisecondsSince1970: wall)) }

        mutating func advance(_ milliseconds: Int64) {
            clock.advance(.milliseconds(milliseconds))
            wall += milliseconds
        }

        mutating func state(_ connection: Int, _ state: String, socket: String? = nil) -> PusherConnectionSet.Effects {
            set.connectionChanged(connection, to: state, connected: state == "connected", socketID: socket, now: now)
        }

        /// Connections 0 and 1 up (socket ids 1.1 and 2.2), each holding `channels`, in that order.
        mutating func bothUp(holding channels: [String] = []) {
            _ = state(0, "connected", socket: "1.1")
            _ = state(1, "connected", socket: "2.2")
            for channel in channels {
                _ = set.subscribed(channel, connection: 0, now: now)
                _ = set.subscribed(channel, connection: 1, now: now)
            }
        }

        mutating func event(_ connection: Int, _ channel: String, _ data: String) -> Bool {
            set.event(connection: connection, channel: channel, key: PusherEventKey(name: "e", data: data, userID: nil), now: now)
                == .publish
        }
    }

    @Test func withOneConnectionEveryStatePassesThrough() {
        // Expected: each state the one connection reports reaches the machine, as before.
        var rig = Rig(connections: 1)
        let result1 = rig.state(0, "connecting")
        #expect(result1.side?.state == "connecting")
        let up = rig.state(0, "connected", socket: "1.1").side
        #expect(up == .init(state: "connected", connected: true, wasConnected: false, socketID: "1.1"))
        let result2 = rig.state(0, "unavailable")
        #expect(result2.side == .init(state: "unavailable", connected: false, wasConnected: true, socketID: nil))
        let result3 = rig.set.event(connection: 0, channel: "c", key: PusherEventKey(name: "e", data: "x", userID: nil), now: rig.now)
        #expect(result3 == .publish)
    }

    @Test func theSideIsUpWhileAnyConnectionIs() {
        // Expected: up with the first connection; the second's ups and downs change nothing; down
        // when the last goes.
        var rig = Rig(connections: 2)
        let result4 = rig.state(0, "connecting")
        #expect(result4.side == nil)
        #expect(
            rig.state(0, "connected", socket: "1.1").side
                == .init(state: "connected", connected: true, wasConnected: false, socketID: "1.1"))
        let result5 = rig.state(1, "connected", socket: "2.2")
        #expect(result5.side == nil)
        #expect(rig.set.socketID == "1.1")
        let result6 = rig.state(0, "connecting")
        #expect(result6.side == nil)
        #expect(rig.set.socketID == "2.2")
        #expect(rig.set.anyConnected)
        let result7 = rig.state(1, "unavailable")
        #expect(result7.side == .init(state: "unavailable", connected: false, wasConnected: true, socketID: nil))
        #expect(!rig.set.anyConnected)
        #expect(rig.set.states == ["connecting", "unavailable"])
    }

    @Test func theMachineHearsOfTheFirstHolderOnlyAndAGapEndsThere() {
        // Expected: connection 0's subscription is the channel's first (no gap: never held);
        // 1's is not. Both go down at 1 s; 1 is back and subscribed at 3.5 s: a 2.5 s gap, once.
        var rig = Rig(connections: 2)
        rig.bothUp()
        let first = rig.set.subscribed("c", connection: 0, now: rig.now)
        #expect(first.first && first.gap == nil)
        let second = rig.set.subscribed("c", connection: 1, now: rig.now)
        #expect(!second.first && second.gap == nil)
        rig.advance(1000)
        _ = rig.state(0, "connecting")
        _ = rig.state(1, "connecting")
        rig.advance(2500)
        _ = rig.state(1, "connected", socket: "2.3")
        let back = rig.set.subscribed("c", connection: 1, now: rig.now)
        #expect(back.first)
        #expect(
            back.gap
                == PusherGap(
                    channel: "c", from: UTCTimestamp(millisecondsSince1970: 1_790_000_001_000),
                    to: UTCTimestamp(millisecondsSince1970: 1_790_000_003_500), milliseconds: 2500))
        _ = rig.state(0, "connected", socket: "1.4")
        let again = rig.set.subscribed("c", connection: 0, now: rig.now)
        #expect(!again.first && again.gap == nil)
        #expect(rig.set.coverage.counters.gaps == 1)
    }

    @Test func connectionsReplacedOneAtATimeLoseNothingEvenWhenTheOldOneMissesTheLastEvent() {
        // Expected (six reloads of two connections, BridgeRuntime+PusherReplacement): each round
        // replaces connection a (down, back, live) while b delivers, then b goes down before it
        // delivered r, which the new a had first: every event published once, in order.
        var rig = Rig(connections: 2)
        rig.bothUp(holding: ["c"])
        var published: [String] = []
        func take(_ connection: Int, _ data: String) {
            let arrived = PusherConnectionSet.ArrivedEvent(
                name: "e", data: data, userID: nil, receivedAt: UTCTimestamp(millisecondsSince1970: 0))
            let (_, out) = rig.set.deliver(arrived, channel: "c", connection: connection, now: rig.now)
            for item in out { published.append(item.event.data ?? "") }
        }
        func released() {
            for item in rig.set.takeReleasedEvents() { published.append(item.event.data ?? "") }
        }
        for round in 0..<6 {
            let a = round % 2
            let b = 1 - a
            rig.advance(10)
            take(a, "p\(round)")
            take(b, "p\(round)")
            _ = rig.state(a, "disconnected")
            released()
            rig.advance(10)
            take(b, "q\(round)")
            _ = rig.state(a, "connected", socket: "n\(round)")
            _ = rig.set.subscribed("c", connection: a, now: rig.now)
            rig.advance(10)
            take(a, "r\(round)")
            _ = rig.state(b, "disconnected")
            released()
            _ = rig.state(b, "connected", socket: "m\(round)")
            _ = rig.set.subscribed("c", connection: b, now: rig.now)
            rig.advance(10)
        }
        #expect(published == (0..<6).flatMap { ["p\($0)", "q\($0)", "r\($0)"] })
    }

    @Test func oneConnectionsCloseLeavesNoGapAndLosesNoEvent() {
        // Expected: events 1–3 from both connections publish once each; 0 closes; 4 comes from 1
        // alone and is published; 0 back and live: its copy of 5 after 1's is a duplicate.
        var rig = Rig(connections: 2)
        rig.bothUp(holding: ["c"])
        var published: [String] = []
        for data in ["1", "2", "3"] {
            rig.advance(10)
            if rig.event(0, "c", data) { published.append(data) }
            if rig.event(1, "c", data) { published.append(data) }
        }
        _ = rig.state(0, "connecting")
        rig.advance(10)
        if rig.event(1, "c", "4") { published.append("4") }
        _ = rig.state(0, "connected", socket: "1.5")
        let back = rig.set.subscribed("c", connection: 0, now: rig.now)
        #expect(!back.first && back.gap == nil)
        rig.advance(10)
        if rig.event(1, "c", "5") { published.append("5") }
        if rig.event(0, "c", "5") { published.append("5") }
        #expect(published == ["1", "2", "3", "4", "5"])
        #expect(rig.set.merge.counters.duplicates == 4)
    }

    @Test func aRefusedSubscriptionReachesTheMachineOnlyWhenNoOtherConnectionHoldsTheChannel() {
        var rig = Rig(connections: 2)
        rig.bothUp()
        _ = rig.set.subscribed("private-c", connection: 0, now: rig.now)
        let result8 = rig.set.subscriptionFailed("private-c", connection: 1, now: rig.now)
        #expect(!result8)
        let result9 = rig.set.subscriptionFailed("private-d", connection: 1, now: rig.now)
        #expect(result9)
    }

    @Test func aSubscriptionCountCountsTheBridgeOnce() {
        // Expected: with both connections holding the channel, Pusher's 3 is one device and the
        // bridge (2); with one holding it, counts pass as they are.
        var rig = Rig(connections: 2)
        rig.bothUp()
        _ = rig.set.subscribed("c", connection: 0, now: rig.now)
        #expect(rig.set.subscriptionCountAsOneSubscriber(2, on: "c") == 2)
        _ = rig.set.subscribed("c", connection: 1, now: rig.now)
        #expect(rig.set.subscriptionCountAsOneSubscriber(3, on: "c") == 2)
        #expect(rig.set.subscriptionCountAsOneSubscriber(2, on: "c") == 1)
        #expect(rig.set.subscriptionCountAsOneSubscriber(0, on: "c") == 0)
    }

    @Test func aChannelLeftOnPurposeReportsNoGap() {
        // Expected: the bridge left c (discovery, a reload): re-joined later, no gap record.
        var rig = Rig(connections: 2)
        _ = rig.state(0, "connected", socket: "1.1")
        _ = rig.set.subscribed("c", connection: 0, now: rig.now)
        rig.set.channelLeft("c")
        rig.advance(5000)
        let again = rig.set.subscribed("c", connection: 0, now: rig.now)
        #expect(again.first && again.gap == nil)
    }

    @Test func aDroppedConnectionsPresenceIsConsolidated() {
        // Expected: connection 0 drops while 1 holds the presence channel: only the member 0 alone
        // listed is removed.
        var rig = Rig(connections: 2)
        rig.bothUp(holding: ["presence-p"])
        _ = rig.set.presenceSubscribed("presence-p", connection: 0, members: [.init(userID: "a"), .init(userID: "b")])
        _ = rig.set.presenceSubscribed("presence-p", connection: 1, members: [.init(userID: "a")])
        let result10 = rig.state(0, "connecting")
        #expect(result10.presence == [.removed("presence-p", userID: "b")])
    }

    @Test func theBridgesOwnPublishIsAnEchoOnTheOtherConnectionsOnly() {
        // Expected: the bridge publishes "x" excluding connection 0: connection 1's copy is an
        // echo (suppressed), never published; a genuine "x" afterwards, from both, is published once.
        var rig = Rig(connections: 2)
        rig.bothUp(holding: ["c"])
        let key = PusherEventKey(name: "e", data: "x", userID: nil)
        rig.set.ownEvent(channel: "c", key: key, sentOn: 0, now: rig.now)
        rig.advance(5)
        let echo = rig.set.event(connection: 1, channel: "c", key: key, now: rig.now)
        #expect(echo == .ownEcho)
        rig.advance(5)
        let published1 = rig.event(0, "c", "x")
        #expect(published1)
        let published2 = rig.event(1, "c", "x")
        #expect(!published2)
        #expect(rig.set.merge.counters.ownEchoes == 1)
        #expect(rig.set.merge.counters.duplicates == 1)
    }

    @Test func anOwnPublishNobodyElseHoldsKeepsNothing() {
        // Expected: only connection 0 (the excluded one) is live: nothing can echo, nothing is kept.
        var rig = Rig(connections: 2)
        _ = rig.state(0, "connected", socket: "1.1")
        _ = rig.set.subscribed("c", connection: 0, now: rig.now)
        let published3 = rig.event(0, "c", "warm-up")
        #expect(published3)
        rig.advance(3000)
        rig.set.expire(now: rig.now)
        rig.set.ownEvent(channel: "c", key: PusherEventKey(name: "e", data: "x", userID: nil), sentOn: 0, now: rig.now)
        #expect(rig.set.merge.entryCount(on: "c") == 0)
    }

    @Test func anOwnPublishThatNeverEchoesIsNotCountedAgainstAConnection() {
        // Expected: the echo never comes (the publish failed); after the window the entry leaves
        // without marking connection 1 behind: its next event is new, not a late copy.
        var rig = Rig(connections: 2)
        rig.bothUp(holding: ["c"])
        rig.set.ownEvent(channel: "c", key: PusherEventKey(name: "e", data: "x", userID: nil), sentOn: 0, now: rig.now)
        rig.advance(11_000)
        let published4 = rig.event(1, "c", "y")
        #expect(published4)
        #expect(rig.set.merge.counters.expiredUnmatched == 0)
        #expect(rig.set.merge.counters.lateCopies == 0)
    }
}
