import TestSupport
import Testing

@testable import BridgeCore

/// The merge of redundant Pusher connections (docs/pusher-merge.md) on a manual clock: the hard
/// cases of issue 28, each with its expected outcome written before the assertions.
@Suite struct PusherEventMergeTests {
    typealias Verdict = PusherEventMerge.Verdict

    /// A merge, a manual clock, and what it published (by label) per channel.
    struct Rig {
        var merge: PusherEventMerge
        var clock = ManualClock()
        var published: [String: [String]] = [:]

        init(connections: Int = 2, limits: PusherEventMerge.Limits = .default, live: Bool = true, channel: String = "c") {
            merge = PusherEventMerge(connections: connections, limits: limits)
            if live {
                for connection in 0..<connections { merge.connectionLive(connection, channel: channel, now: clock.now) }
            }
        }

        static func key(_ label: String) -> PusherEventKey { PusherEventKey(name: "e", data: label, userID: nil) }

        @discardableResult
        mutating func deliver(_ connection: Int, _ label: String, on channel: String = "c") -> Verdict {
            let verdict = merge.event(connection: connection, channel: channel, key: Self.key(label), now: clock.now)
            if verdict == .publish { published[channel, default: []].append(label) }
            return verdict
        }

        @discardableResult
        mutating func deliver(_ connection: Int, _ labels: [String], on channel: String = "c") -> [Verdict] {
            labels.map { deliver(connection, $0, on: channel) }
        }

        mutating func live(_ connection: Int, on channel: String = "c") {
            merge.connectionLive(connection, channel: channel, now: clock.now)
        }

        mutating func advance(_ duration: Duration) { clock.advance(duration) }
    }

    // MARK: The basics

    @Test func withOneConnectionEveryEventIsPublishedAndNoLogIsKept() {
        // Expected: identical events in a row all published; nothing kept; no connection state.
        var rig = Rig(connections: 1)
        #expect(rig.deliver(0, ["x", "x", "y", "x"]) == [.publish, .publish, .publish, .publish])
        #expect(rig.merge.entryCount == 0)
        #expect(rig.merge.liveConnections(on: "c").isEmpty)
        #expect(rig.merge.counters.published == 4)
        #expect(rig.merge.counters.duplicates == 0)
    }

    @Test func theFirstCopyIsPublishedAtOnceAndTheOthersAreSuppressed() {
        // Expected: whichever connection is first publishes; the other two copies are duplicates.
        var rig = Rig(connections: 3)
        #expect(rig.deliver(1, "a") == .publish)
        #expect(rig.deliver(0, "a") == .duplicate)
        #expect(rig.deliver(2, "a") == .duplicate)
        #expect(rig.deliver(2, "b") == .publish)
        #expect(rig.deliver(1, "b") == .duplicate)
        #expect(rig.deliver(0, "b") == .duplicate)
        #expect(rig.published["c"] == ["a", "b"])
        #expect(rig.merge.counters == .init(published: 2, duplicates: 4))
    }

    @Test func identicalPayloadsInARowAreAllPublishedOncePerOccurrence() {
        // Expected: the app sent x three times: three publishes, whichever connection is ahead;
        // each connection's n-th x is the n-th occurrence, so the other's copies are duplicates.
        var rig = Rig()
        #expect(rig.deliver(0, "x") == .publish)
        #expect(rig.deliver(1, "x") == .duplicate)
        #expect(rig.deliver(1, "x") == .publish, "connection 1 is ahead now: its second x is the second occurrence")
        #expect(rig.deliver(0, "x") == .duplicate)
        #expect(rig.deliver(0, "x") == .publish)
        #expect(rig.deliver(1, "x") == .duplicate)
        #expect(rig.published["c"] == ["x", "x", "x"])
    }

    @Test func channelsAreMergedApart() {
        // Expected: the same event on two channels is two events.
        var rig = Rig()
        rig.live(0, on: "d")
        rig.live(1, on: "d")
        #expect(rig.deliver(0, "x", on: "c") == .publish)
        #expect(rig.deliver(0, "x", on: "d") == .publish)
        #expect(rig.deliver(1, "x", on: "d") == .duplicate)
        #expect(rig.deliver(1, "x", on: "c") == .duplicate)
    }

    // MARK: Lag, stalls, bursts

    @Test func aConnectionThatLagsByASecondOnlyProducesDuplicates() {
        // Expected: connection 1 delivers the same stream (with repeats) one second later: every
        // copy suppressed, the output is the stream once, in order.
        var rig = Rig()
        let stream = ["a", "b", "a", "a", "c", "b"]
        for label in stream {
            #expect(rig.deliver(0, label) == .publish)
            rig.advance(.milliseconds(100))
        }
        rig.advance(.milliseconds(400))
        for label in stream {
            #expect(rig.deliver(1, label) == .duplicate)
            rig.advance(.milliseconds(100))
        }
        #expect(rig.published["c"] == stream)
        #expect(rig.merge.counters.duplicates == 6)
        #expect(rig.merge.counters.lateCopies == 0)
    }

    @Test func aBurstAfterAStallWithinTheWindowIsAllDuplicates() {
        // Expected: connection 1 stalls 5 s while 0 delivers 50 events, then delivers all 50 at
        // one instant: 50 duplicates, nothing published twice; then both go on in step.
        var rig = Rig()
        let stream = (0..<50).map { "e\($0 % 7)" }
        for label in stream {
            rig.deliver(0, label)
            rig.advance(.milliseconds(100))
        }
        #expect(rig.deliver(1, stream) == Array(repeating: .duplicate, count: 50))
        #expect(rig.deliver(1, "next") == .publish)
        #expect(rig.deliver(0, "next") == .duplicate)
        #expect(rig.published["c"] == stream + ["next"])
    }

    @Test func aBurstLaterThanTheWindowSuppressesTheLateCopiesAndCountsThem() {
        // Expected: 0 delivers one event a second for 15 s; 1 stalls and delivers all 15 at 15 s.
        // Entries published at 0…5 s are past the 10 s window (6 entries, expired unmatched): 1's
        // first 6 unmatched events are their copies (it delivers in order, missing nothing), so
        // they are suppressed as late copies; the 9 still in the window are matched duplicates.
        var rig = Rig()
        for n in 0..<15 {
            rig.deliver(0, "e\(n)")
            rig.advance(.seconds(1))
        }
        let verdicts = rig.deliver(1, (0..<15).map { "e\($0)" })
        #expect(verdicts == Array(repeating: .duplicate, count: 15))
        #expect(rig.merge.counters.lateCopies == 6)
        #expect(rig.merge.counters.expiredUnmatched == 6)
        #expect(rig.merge.counters.duplicates == 15)
        #expect(rig.published["c"] == (0..<15).map { "e\($0)" })
        // In step again: the next event from 1 first is new.
        #expect(rig.deliver(1, "e15") == .publish)
    }

    // MARK: A connection becoming live

    @Test func aConnectionLiveJustAfterTheOtherDeliveredAnEventTakesItsCopyForACopy() {
        // Rule: a joining connection may match entries published less than the join grace (2 s)
        // before it became live. Expected: 0 delivers x, 1 becomes live 100 ms later and delivers
        // x: a copy, suppressed (one join match); then y from both: published once.
        var rig = Rig(live: false)
        rig.live(0)
        rig.deliver(0, "x")
        rig.advance(.milliseconds(100))
        rig.live(1)
        rig.advance(.milliseconds(50))
        #expect(rig.deliver(1, "x") == .duplicate)
        #expect(rig.merge.counters.joinMatches == 1)
        #expect(rig.deliver(1, "y") == .publish)
        #expect(rig.deliver(0, "y") == .duplicate)
        #expect(rig.published["c"] == ["x", "y"])
    }

    @Test func aSecondIdenticalEventRightAfterTheJoinIsPublishedWhenTheOtherConnectionDeliversIt() {
        // The other reading of the same arrivals: the app sent x before 1's subscription took
        // effect and x again after it. Expected: 1's x is suppressed (taken for the copy), and
        // 0's second x, past 0's cursor, is published: x twice, the second at 0's arrival.
        var rig = Rig(live: false)
        rig.live(0)
        rig.deliver(0, "x")
        rig.advance(.milliseconds(100))
        rig.live(1)
        rig.advance(.milliseconds(50))
        #expect(rig.deliver(1, "x") == .duplicate)
        rig.advance(.milliseconds(30))
        #expect(rig.deliver(0, "x") == .publish)
        #expect(rig.published["c"] == ["x", "x"])
        // 1's cursor is past the first x only, so its next x is the copy of the second.
        #expect(rig.deliver(1, "x") == .duplicate)
        #expect(rig.deliver(1, "z") == .publish)
        #expect(rig.deliver(0, "z") == .duplicate)
    }

    @Test func aConnectionLiveLaterThanTheJoinGraceMatchesNothingOlder() {
        // Expected: 0 delivered x 3 s before 1 became live (grace 2 s): 1's x is a new event.
        var rig = Rig(live: false)
        rig.live(0)
        rig.deliver(0, "x")
        rig.advance(.seconds(3))
        rig.live(1)
        #expect(rig.deliver(1, "x") == .publish)
        #expect(rig.deliver(0, "x") == .duplicate)
        #expect(rig.published["c"] == ["x", "x"])
        #expect(rig.merge.counters.joinMatches == 0)
    }

    @Test func aJoiningConnectionThatLagsCatchesUpThroughTheGraceEntries() {
        // Expected: 0 delivered a b c within the last second; 1 becomes live and delivers b c d:
        // b and c are copies (its subscription took effect after a), d is new.
        var rig = Rig(live: false)
        rig.live(0)
        for label in ["a", "b", "c"] {
            rig.deliver(0, label)
            rig.advance(.milliseconds(200))
        }
        rig.live(1)
        #expect(rig.deliver(1, ["b", "c", "d"]) == [.duplicate, .duplicate, .publish])
        #expect(rig.deliver(0, "d") == .duplicate)
        #expect(rig.published["c"] == ["a", "b", "c", "d"])
    }

    // MARK: Losing channels and connections

    @Test func aChannelLeftAndRejoinedStartsAfresh() {
        // Expected: before the leave 0 delivered x (1 had not yet); after the re-join x is sent
        // again: published, and 1's old copy is never matched across the leave.
        var rig = Rig()
        rig.deliver(0, "x")
        rig.merge.channelLeft("c")
        #expect(rig.merge.entryCount == 0)
        #expect(rig.merge.liveConnections(on: "c").isEmpty)
        rig.advance(.milliseconds(500))
        rig.live(0)
        rig.live(1)
        #expect(rig.deliver(1, "x") == .publish)
        #expect(rig.deliver(0, "x") == .duplicate)
        #expect(rig.published["c"] == ["x", "x"])
    }

    @Test func allConnectionsDownAtOnceThenOneBackSuppressesNothing() {
        // Expected: both down 100 ms after x and y (inside the join grace); 1 comes back alone:
        // no other connection is live, so its x and y are new events, both published; then 0
        // comes back and joins by the grace rule: its copies are duplicates.
        var rig = Rig()
        rig.deliver(0, ["x", "y"])
        rig.deliver(1, ["x", "y"])
        rig.advance(.milliseconds(100))
        rig.merge.connectionDown(0)
        rig.merge.connectionDown(1)
        #expect(rig.merge.entryCount == 0, "no connection live: the log is dropped")
        rig.advance(.milliseconds(300))
        rig.live(1)
        #expect(rig.deliver(1, ["x", "y"]) == [.publish, .publish])
        rig.advance(.milliseconds(100))
        rig.live(0)
        #expect(rig.deliver(0, ["x", "y"]) == [.duplicate, .duplicate])
        #expect(rig.published["c"] == ["x", "y", "x", "y"])
    }

    @Test func aConnectionBackOnPeriodicDataTakesOlderTwinsForItsCopiesWhileTheOtherPublishes() {
        // 1 goes down; 0 carries e0 e1 e2 e0 … alone for 5 s; 1 comes back. Rule: a joining
        // connection's copy matches the *first* entry with its key inside the 2 s grace that it
        // has not delivered, so on periodic data it takes entries it never received for its
        // copies (the join ambiguity). Expected: its e0 e1 (copies of 0's last two) are
        // duplicates; its new e2 and, after a novel z, its new e0 are taken for older twins too
        // (suppressed, join matches) and published when 0 delivers them: the output is still the
        // stream once, at 0's pace for those.
        var rig = Rig()
        rig.merge.connectionDown(1)
        #expect(rig.merge.liveConnections(on: "c") == [0])
        for n in 0..<50 {
            #expect(rig.deliver(0, "e\(n % 3)") == .publish)
            rig.advance(.milliseconds(100))
        }
        rig.live(1)
        #expect(rig.deliver(1, ["e0", "e1"]) == [.duplicate, .duplicate])
        #expect(rig.deliver(1, "e2") == .duplicate)
        #expect(rig.deliver(0, "e2") == .publish)
        #expect(rig.deliver(1, "z") == .publish)
        #expect(rig.deliver(0, "z") == .duplicate)
        #expect(rig.deliver(1, "e0") == .duplicate)
        #expect(rig.deliver(0, "e0") == .publish)
        #expect(rig.merge.counters.joinMatches == 4)
        #expect(rig.published["c"]?.count == 53)
    }

    @Test func aLaggingConnectionStillDeliversCopiesAfterTheLeaderWentDown() {
        // Expected: 0 is ahead by three events and goes down; 1 delivers the three copies
        // (suppressed), then new events (published).
        var rig = Rig()
        rig.deliver(0, ["a", "b", "a"])
        rig.merge.connectionDown(0)
        #expect(rig.deliver(1, ["a", "b", "a", "c"]) == [.duplicate, .duplicate, .duplicate, .publish])
        #expect(rig.published["c"] == ["a", "b", "a", "c"])
    }

    // MARK: Bounds

    @Test func theCountBoundEvictsEarlyAndTheLaggingConnectionsCopiesAreStillSuppressed() {
        // Limits: 4 entries. Expected: 0 delivers 10 while 1 lags; 6 are evicted before their time
        // (evicted by count, expired unmatched for 1); 1's copies of those 6 are suppressed as late
        // copies (found under overload by the bench: publishing them again doubled 57 % of a
        // 100,000-event burst), its copies of the last 4 are matched duplicates.
        var rig = Rig(limits: .init(window: .seconds(10), maxEntries: 4, joinGrace: .seconds(2)))
        for n in 0..<10 { rig.deliver(0, "e\(n)") }
        #expect(rig.merge.entryCount(on: "c") == 4)
        #expect(rig.merge.counters.evictedByCount == 6)
        #expect(rig.merge.counters.expiredUnmatched == 6)
        let verdicts = rig.deliver(1, (0..<10).map { "e\($0)" })
        #expect(verdicts == Array(repeating: .duplicate, count: 10))
        #expect(rig.merge.counters.lateCopies == 6)
        #expect(rig.published["c"] == (0..<10).map { "e\($0)" })
    }

    @Test func inStepConnectionsKeepOnlyTheJoinGraceInMemory() {
        // Expected: at 100 events/s for 60 s with both connections in step, entries passed by
        // both leave after the 2 s join grace: about 200 kept, never the whole window.
        var rig = Rig()
        var most = 0
        for n in 0..<6000 {
            rig.deliver(0, "e\(n % 10)")
            rig.deliver(1, "e\(n % 10)")
            most = max(most, rig.merge.entryCount)
            rig.advance(.milliseconds(10))
        }
        #expect(most <= 201)
        #expect(rig.merge.counters.published == 6000)
        #expect(rig.merge.counters.duplicates == 6000)
    }

    @Test func expiringAQuietChannelGivesItsEntriesBack() {
        // Expected: 5 entries that 1 never delivered stay until the window passes, then leave
        // (counted as expired unmatched), without another event on the channel.
        var rig = Rig()
        rig.deliver(0, ["a", "b", "c", "d", "e"])
        rig.advance(.seconds(9))
        rig.merge.expire(now: rig.clock.now)
        #expect(rig.merge.entryCount == 5)
        rig.advance(.seconds(1))
        rig.merge.expire(now: rig.clock.now)
        #expect(rig.merge.entryCount == 0)
        #expect(rig.merge.counters.expiredUnmatched == 5)
    }

    @Test func theEventKeyTellsPartsApart() {
        // Expected: moving bytes between name, data and user id changes the key; absent data or
        // user id differs from empty; equal parts give equal keys.
        let key = PusherEventKey(name: "ab", data: "c", userID: nil)
        #expect(key == PusherEventKey(name: "ab", data: "c", userID: nil))
        #expect(key != PusherEventKey(name: "a", data: "bc", userID: nil))
        #expect(key != PusherEventKey(name: "ab", data: "c", userID: ""))
        #expect(PusherEventKey(name: "ab", data: nil, userID: nil) != PusherEventKey(name: "ab", data: "", userID: nil))
        #expect(key.nameLength == 2 && key.dataLength == 1 && key.userIDLength == -1)
    }
}
