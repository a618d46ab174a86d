import TestSupport
import Testing

@testable import BridgeCore

/// Which connections hold each channel, and the gap records (docs/pusher-merge.md, "Gap
/// records"), on a manual clock: the wall clock moves with the monotonic one unless a test says.
@Suite struct ChannelCoverageTests {
    struct Rig {
        var coverage: ChannelCoverage
        var clock = ManualClock()
        var wall: Int64 = 1_790_000_000_000

        init(connections: Int = 2, lastHeld: [String: UTCTimestamp] = [:]) {
            coverage = ChannelCoverage(connections: connections, lastHeld: lastHeld)
            for connection in 0..<connections { coverage.connectionCameUp(connection) }
        }

        var now: ChannelCoverage.Now { .init(clock.now, wall: UTCTimestamp(millisecondsSince1970: wall)) }

        mutating func advance(_ milliseconds: Int64) {
            clock.advance(.milliseconds(milliseconds))
            wall += milliseconds
        }

        mutating func subscribed(_ channel: String, _ connection: Int) -> PusherGap? {
            coverage.subscribed(channel, connection: connection, now: now)
        }

        func at(_ offset: Int64) -> UTCTimestamp { UTCTimestamp(millisecondsSince1970: 1_790_000_000_000 + offset) }
    }

    @Test func aChannelNeverHeldBeforeHasNoGap() {
        // Expected: the first subscription ends nothing; the second connection neither.
        var rig = Rig()
        rig.advance(700)
        #expect(rig.subscribed("c", 0) == nil)
        #expect(rig.subscribed("c", 1) == nil)
        #expect(rig.coverage.holders(of: "c") == [0, 1])
        #expect(rig.coverage.counters.gaps == 0)
    }

    @Test func oneConnectionDownIsNoGap() {
        // Expected: 0 goes down, 1 still holds the channel: no gap begins, none is reported when 0
        // is back.
        var rig = Rig()
        _ = rig.subscribed("c", 0)
        _ = rig.subscribed("c", 1)
        rig.advance(100)
        #expect(rig.coverage.connectionWentDown(0, now: rig.now).isEmpty)
        #expect(rig.coverage.uncoveredChannels.isEmpty)
        rig.advance(1000)
        rig.coverage.connectionCameUp(0)
        #expect(rig.subscribed("c", 0) == nil)
    }

    @Test func allConnectionsDownIsOneGapPerChannelEndedByTheFirstSubscriptionBack() {
        // Expected: both down at 1.000 s and 1.050 s: the gap of each channel begins at 1.050 s;
        // connection 1 back and subscribed to c at 3.300 s: c's gap is 1.050 → 3.300 (2.250 s);
        // connection 0 on c after that ends nothing; d's gap ends when d is held again.
        var rig = Rig()
        for channel in ["c", "d"] {
            _ = rig.subscribed(channel, 0)
            _ = rig.subscribed(channel, 1)
        }
        rig.advance(1000)
        #expect(rig.coverage.connectionWentDown(0, now: rig.now).isEmpty)
        rig.advance(50)
        #expect(rig.coverage.connectionWentDown(1, now: rig.now) == ["c", "d"])
        #expect(!rig.coverage.anyConnectionUp)
        #expect(rig.coverage.uncoveredChannels == ["c", "d"])
        rig.advance(2000)
        rig.coverage.connectionCameUp(1)
        #expect(rig.coverage.anyConnectionUp)
        #expect(rig.coverage.connectionUp == [false, true])
        rig.advance(250)
        let gap = rig.subscribed("c", 1)
        #expect(gap == PusherGap(channel: "c", from: rig.at(1050), to: rig.at(3300), milliseconds: 2250))
        #expect(
            gap?.json == "{\"channel\":\"c\",\"from\":\"2026-09-21T14:13:21.050Z\",\"to\":\"2026-09-21T14:13:23.300Z\",\"seconds\":2.250}")
        rig.coverage.connectionCameUp(0)
        #expect(rig.subscribed("c", 0) == nil)
        rig.advance(100)
        #expect(rig.subscribed("d", 0)?.milliseconds == 2350)
        #expect(rig.coverage.counters == .init(gaps: 2, gapMilliseconds: 4600))
    }

    @Test func theTimeBetweenAReconnectAndItsSubscriptionIsPartOfTheGap() {
        // One connection. Expected: down at 0.5 s, up again at 0.6 s (no gap ends: not yet
        // subscribed), subscribed at 0.9 s: gap 0.5 → 0.9.
        var rig = Rig(connections: 1)
        _ = rig.subscribed("c", 0)
        rig.advance(500)
        rig.coverage.connectionWentDown(0, now: rig.now)
        rig.advance(100)
        rig.coverage.connectionCameUp(0)
        #expect(rig.coverage.uncoveredChannels == ["c"])
        rig.advance(300)
        #expect(rig.subscribed("c", 0) == PusherGap(channel: "c", from: rig.at(500), to: rig.at(900), milliseconds: 400))
    }

    @Test func aSubscriptionLostOnTheLastHolderBeginsAGap() {
        // Expected: 1 never held c; 0's subscription ends at 2 s (refused on a resubscribe): gap;
        // 1 subscribes at 2.5 s: 0.5 s gap. Losing it on a connection that does not hold it is nothing.
        var rig = Rig()
        _ = rig.subscribed("c", 0)
        let notHeldThere = rig.coverage.unsubscribed("c", connection: 1, now: rig.now)
        #expect(!notHeldThere)
        rig.advance(2000)
        let lastHolder = rig.coverage.unsubscribed("c", connection: 0, now: rig.now)
        #expect(lastHolder)
        rig.advance(500)
        #expect(rig.subscribed("c", 1)?.milliseconds == 500)
    }

    @Test func gapsAreMeasuredOnTheMonotonicClockWhenTheWallClockJumps() {
        // Expected: the wall clock steps back 10 s during a 1 s gap: seconds is still 1.000; from
        // and to are the wall times read.
        var rig = Rig(connections: 1)
        _ = rig.subscribed("c", 0)
        rig.coverage.connectionWentDown(0, now: rig.now)
        rig.clock.advance(.seconds(1))
        rig.wall -= 9000
        rig.coverage.connectionCameUp(0)
        let gap = rig.subscribed("c", 0)
        #expect(gap?.milliseconds == 1000)
        #expect(gap?.from == rig.at(0))
        #expect(gap?.to == rig.at(-9000))
    }

    @Test func leavingOnPurposeIsNoGapAndForgetsTheChannel() {
        // Expected: all down, the bridge leaves c (discovery let it go): no gap is reported when c is
        // joined again later, and c is no longer in the last-held times.
        var rig = Rig()
        _ = rig.subscribed("c", 0)
        rig.coverage.connectionWentDown(0, now: rig.now)
        rig.coverage.channelLeft("c")
        #expect(rig.coverage.lastHeld(now: rig.now).isEmpty)
        rig.advance(5000)
        rig.coverage.connectionCameUp(0)
        #expect(rig.subscribed("c", 0) == nil)
    }

    @Test func aRestartReportsTheGapSinceThePreviousProcessLastHeldTheChannel() {
        // The previous process held c until 10 s before this one's clock starts, and d until 20 s
        // before. Expected: c's first subscription reports 10.400 s (wall clock: the instants of
        // another process mean nothing here); e, never held, reports nothing; d's gap is
        // reported when d is first held, even after a second connection held c.
        var rig = Rig(lastHeld: [
            "c": UTCTimestamp(millisecondsSince1970: 1_790_000_000_000 - 10_000),
            "d": UTCTimestamp(millisecondsSince1970: 1_790_000_000_000 - 20_000),
        ])
        #expect(rig.coverage.uncoveredChannels == ["c", "d"])
        rig.advance(400)
        #expect(rig.subscribed("c", 0) == PusherGap(channel: "c", from: rig.at(-10_000), to: rig.at(400), milliseconds: 10_400))
        #expect(rig.subscribed("c", 1) == nil)
        #expect(rig.subscribed("e", 0) == nil)
        #expect(rig.subscribed("d", 1)?.milliseconds == 20_400)
    }

    @Test func theLastHeldTimesAreNowForHeldChannelsAndTheGapStartForTheOthers() {
        // Expected: c held → now; d lost at 1 s → 1 s; f only known from disk → its time there.
        var rig = Rig(lastHeld: ["f": UTCTimestamp(millisecondsSince1970: 42)])
        _ = rig.subscribed("c", 0)
        _ = rig.subscribed("d", 1)
        rig.advance(1000)
        rig.coverage.connectionWentDown(1, now: rig.now)
        rig.advance(4000)
        #expect(
            rig.coverage.lastHeld(now: rig.now) == [
                "c": rig.at(5000), "d": rig.at(1000), "f": UTCTimestamp(millisecondsSince1970: 42),
            ])
    }

    @Test func aTakeoverReportsTheGapSinceItsLastHolderHadIt() {
        // Expected: the member that held c elsewhere last had it 3 s ago: the first subscription
        // here reports 3 s; an older time than one known is ignored; a held channel ignores it.
        var rig = Rig()
        rig.coverage.takenOver("c", lastHeldAt: rig.at(-3000))
        rig.coverage.takenOver("c", lastHeldAt: rig.at(-9000))
        #expect(rig.subscribed("c", 0)?.milliseconds == 3000)
        rig.coverage.takenOver("c", lastHeldAt: rig.at(-1000))
        #expect(rig.coverage.uncoveredChannels.isEmpty)
        #expect(rig.subscribed("c", 1) == nil)
    }

    @Test func aHandoverReportsNoGapWhateverTheRestartRecordSays() {
        // Expected: this process held c before a restart 60 s ago (its record); meanwhile another
        // member held it and now hands it back: no gap. A handover of a held channel changes
        // nothing; d, with only the restart record, still reports its restart gap.
        let before = UTCTimestamp(millisecondsSince1970: 1_790_000_000_000 - 60_000)
        var rig = Rig(lastHeld: ["c": before, "d": before])
        rig.coverage.takenOver("c", lastHeldAt: nil)
        #expect(rig.subscribed("c", 0) == nil)
        rig.coverage.takenOver("c", lastHeldAt: nil)
        #expect(rig.coverage.isHeld("c"))
        #expect(rig.subscribed("d", 0)?.milliseconds == 60_000)
    }

    @Test func readinessFollowsTheConnections() {
        // Expected: none up at first; up while any is; per connection as told; an index out of
        // range changes nothing.
        var coverage = ChannelCoverage(connections: 3)
        #expect(!coverage.anyConnectionUp)
        coverage.connectionCameUp(2)
        coverage.connectionCameUp(7)
        #expect(coverage.connectionUp == [false, false, true])
        #expect(coverage.anyConnectionUp)
        coverage.connectionWentDown(2, now: .init(.now, wall: UTCTimestamp(millisecondsSince1970: 0)))
        #expect(!coverage.anyConnectionUp)
    }
}
