import TestSupport
import Testing

@testable import BridgeCore

/// Which events a free MQTT → Pusher lane sends (docs/contract.md §5.2): one batch in flight per
/// channel, the channel that waited longest first, other channels joining a batch only whole.
@Suite struct LaneScheduleTests {
    @Test func aFreeLaneTakesTheChannelThatWaitedLongestUpToTheBatchSize() {
        var schedule = LaneSchedule<Int>(capacity: 100)
        for n in 0..<12 { schedule.arrived(n, channel: "a") }
        schedule.arrived(100, channel: "b")
        let first = schedule.nextBatch(max: 10)
        #expect(first.elements == Array(0..<10))
        #expect(first.channels == ["a"])
        // "a" is in flight: its 10 and 11 wait; "b" goes out on the next lane.
        let second = schedule.nextBatch(max: 10)
        #expect(second.elements == [100] && second.channels == ["b"])
        let none = schedule.nextBatch(max: 10)
        #expect(none.elements.isEmpty)
        #expect(schedule.count == 2)
        let readied = schedule.finished(first)
        #expect(readied == 1)
        let rest = schedule.nextBatch(max: 10)
        #expect(rest.elements == [10, 11])
        #expect(schedule.count == 0)
    }

    /// Large events hold the read-ahead to its byte budget: the count alone would let 100 of them wait.
    @Test func theByteBudgetEndsTheRoomBeforeTheCountDoes() {
        var schedule = LaneSchedule<Int>(capacity: 100, byteCapacity: 20_000)
        var added = 0
        while schedule.hasRoom {
            schedule.arrived(added, channel: "big", bytes: 8_192)
            added += 1
        }
        #expect(added == 3)  // 16 KiB < 20,000: a third fits; 24 KiB leaves no room
        #expect(schedule.bytes == 3 * 8_192)
        let batch = schedule.nextBatch(max: 2)
        #expect(batch.elements == [0, 1])
        #expect(schedule.bytes == 8_192 && schedule.count == 1)
        #expect(schedule.hasRoom)
        // One event always fits, however large: an empty schedule has room.
        var single = LaneSchedule<Int>(capacity: 10, byteCapacity: 100)
        single.arrived(0, channel: "c", bytes: 1_000_000)
        #expect(!single.hasRoom)
        #expect(single.nextBatch(max: 10).elements == [0])
        #expect(single.hasRoom && single.bytes == 0)
    }

    @Test func otherChannelsJoinABatchOnlyWithEverythingTheyHaveWaiting() {
        var schedule = LaneSchedule<String>(capacity: 100)
        for (channel, events) in [("a", 2), ("b", 2), ("c", 7), ("d", 1)] {
            for n in 1...events { schedule.arrived("\(channel)\(n)", channel: channel) }
        }
        // a and b fit whole; c's 7 do not fit in the 6 left, so c waits for a lane of its own.
        let first = schedule.nextBatch(max: 10)
        #expect(first.elements == ["a1", "a2", "b1", "b2"])
        #expect(first.channels == ["a", "b"])
        let second = schedule.nextBatch(max: 10)
        #expect(second.elements == ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "d1"])
        #expect(second.channels == ["c", "d"])
        let none = schedule.nextBatch(max: 10)
        #expect(none.elements.isEmpty)
        let readied = schedule.finished(first)
        #expect(readied == 0 && schedule.count == 0)
    }

    @Test func theFirstChannelFillsTheBatchEvenIfItHasMore() {
        var schedule = LaneSchedule<Int>(capacity: 100)
        for n in 0..<4 { schedule.arrived(n, channel: "a") }
        schedule.arrived(9, channel: "b")
        let batch = schedule.nextBatch(max: 3)
        #expect(batch.elements == [0, 1, 2] && batch.channels == ["a"])
        let next = schedule.nextBatch(max: 3)
        #expect(next.elements == [9] && next.channels == ["b"])
    }

    @Test func anEventArrivingWhileItsChannelIsInFlightDoesNotMakeItReady() {
        var schedule = LaneSchedule<Int>(capacity: 100)
        let readyAtOnce = schedule.arrived(1, channel: "a")
        let batch = schedule.nextBatch(max: 10)
        let readyInFlight = schedule.arrived(2, channel: "a")
        #expect(readyAtOnce && !readyInFlight)
        #expect(!schedule.hasReady)
        let readiedFirst = schedule.finished(batch)
        #expect(readiedFirst == 1)
        #expect(schedule.hasReady)
        // A finished batch whose channels have nothing waiting readies nothing.
        let last = schedule.nextBatch(max: 10)
        let readied = schedule.finished(last)
        #expect(last.elements == [2] && readied == 0)
        #expect(!schedule.hasReady && schedule.count == 0)
    }

    @Test func roomCountsWaitingEventsOnly() {
        var schedule = LaneSchedule<Int>(capacity: 2)
        schedule.arrived(1, channel: "a")
        schedule.arrived(2, channel: "b")
        #expect(!schedule.hasRoom)
        _ = schedule.nextBatch(max: 1)
        #expect(schedule.hasRoom)
        #expect(LaneSchedule<Int>(capacity: 0).capacity == 1)
    }

    /// Many channels, random arrivals and completions: every event leaves exactly once, each
    /// channel's events in order, and a channel never has two batches out.
    @Test func orderPerChannelAndOneBatchPerChannelUnderRandomInterleavings() {
        var generator = SplitMix64(seed: 16)
        var schedule = LaneSchedule<Int>(capacity: 1000)
        var out: [LaneSchedule<Int>.Batch] = []
        var sent: [String: [Int]] = [:]
        var arrived: [String: [Int]] = [:]
        var channelOf: [Int: String] = [:]
        for step in 0..<5000 {
            switch generator.next() % 3 {
            case 0 where schedule.hasRoom:
                let channel = "c\(generator.next() % 7)"
                schedule.arrived(step, channel: channel)
                arrived[channel, default: []].append(step)
                channelOf[step] = channel
            case 1 where out.count < 4:
                let batch = schedule.nextBatch(max: Int(1 + generator.next() % 10))
                guard !batch.elements.isEmpty else { break }
                let busy = Set(out.flatMap(\.channels))
                #expect(busy.isDisjoint(with: batch.channels))
                out.append(batch)
            default:
                guard !out.isEmpty else { break }
                let batch = out.remove(at: Int(generator.next() % UInt64(out.count)))
                for element in batch.elements { sent[channelOf[element, default: "?"], default: []].append(element) }
                schedule.finished(batch)
            }
        }
        #expect(sent.values.reduce(0) { $0 + $1.count } > 1000)
        for (channel, events) in sent {
            #expect(events == Array(arrived[channel, default: []].prefix(events.count)))
        }
    }

    /// A burst over many channels gives its storage back once it drained (a dictionary keeps the
    /// capacity of its largest size otherwise).
    @Test func aDrainedBurstOverManyChannelsReleasesItsStorage() {
        var schedule = LaneSchedule<Int>(capacity: 10_000)
        for n in 0..<1_000 { schedule.arrived(n, channel: "c\(n)") }
        #expect(schedule.storageCapacity >= 1_000)
        var sent = 0
        while true {
            let batch = schedule.nextBatch(max: 100)
            if batch.elements.isEmpty { break }
            sent += batch.elements.count
            schedule.finished(batch)
        }
        #expect(sent == 1_000)
        #expect(schedule.count == 0)
        #expect(schedule.storageCapacity <= LaneSchedule<Int>.retainedChannels)
    }
}
