import TestSupport
import Testing

@testable import BridgeCore

/// The join hold against the reference model's cases (`PusherEventMergeModelTests.scenario`:
/// random interleavings of 1 to 3 connections with outages, latencies up to 300 ms and stalls up
/// to 1.5 s): with distinct payloads, the bridge's limits (a 1 s join hold) lose nothing and put
/// far fewer events out of the channel's order than the merge without the hold, on the same cases.
@Suite("PusherEventMerge's join hold against the reference model")
struct PusherEventMergeHoldModelTests {
    struct Tally: Equatable {
        var delivered = 0
        var lost = 0
        var doubled = 0
        /// Events published after an event later in the channel's order.
        var inversions = 0
    }

    /// One case through a merge with `limits`: what was published on each channel, in order
    /// (held events when released; whatever is still held at the end, released by a last expiry).
    static func run(seed: UInt64, limits: PusherEventMerge.Limits) -> Tally {
        let scenario = PusherEventMergeModelTests.scenario(seed: seed, distinct: true)
        let t0 = ContinuousClock.now
        var merge = PusherEventMerge(connections: scenario.connections, limits: limits)
        let channels = scenario.keys.count
        var published: [[Int]] = Array(repeating: [], count: channels)
        var held: [[Int]] = Array(repeating: [], count: channels)
        var delivered: [Set<Int>] = Array(repeating: [], count: channels)
        func takeReleased() {
            for name in merge.takeReleased() {
                let channel = Int(name.dropFirst())!
                published[channel] += held[channel]
                held[channel] = []
            }
        }
        var last = t0
        for (connection, arrival) in scenario.interleaved(seed: seed) {
            let now = t0 + .milliseconds(arrival.at)
            last = now
            switch arrival.what {
            case .live(let channel, _):
                merge.connectionLive(connection, channel: "c\(channel)", now: now)
            case .event(let channel, let index):
                let key = PusherEventKey(name: "e", data: "k\(scenario.keys[channel][index])", userID: nil)
                let verdict = merge.event(connection: connection, channel: "c\(channel)", key: key, now: now)
                takeReleased()
                if verdict == .publish { published[channel].append(index) }
                if verdict == .held { held[channel].append(index) }
                delivered[channel].insert(index)
            case .down:
                merge.connectionDown(connection)
                takeReleased()
            }
        }
        merge.expire(now: last + .seconds(60))
        takeReleased()
        var tally = Tally()
        for channel in 0..<channels {
            tally.delivered += delivered[channel].count
            var counts: [Int: Int] = [:]
            for index in published[channel] { counts[index, default: 0] += 1 }
            tally.lost += delivered[channel].filter { counts[$0] == nil }.count
            tally.doubled += counts.values.filter { $0 > 1 }.reduce(0) { $0 + $1 - 1 }
            // A second publication of an event (the documented race) is counted as doubled, not
            // again as out of order.
            var highest = -1
            var seen: Set<Int> = []
            for index in published[channel] where seen.insert(index).inserted {
                if index < highest { tally.inversions += 1 }
                highest = max(highest, index)
            }
        }
        return tally
    }

    @Test func withTheJoinHoldNothingIsLostAndFarFewerEventsAreOutOfOrder() {
        // Expected: on the same 1,000 cases, the hold loses nothing, doubles no more than without
        // it, and puts at most half as many events out of the channel's order.
        var without = Tally()
        var with = Tally()
        for seed in UInt64(1)...1000 {
            let a = Self.run(seed: seed, limits: .default)
            let b = Self.run(seed: seed, limits: .bridge)
            without.delivered += a.delivered
            without.lost += a.lost
            without.doubled += a.doubled
            without.inversions += a.inversions
            with.delivered += b.delivered
            with.lost += b.lost
            with.doubled += b.doubled
            with.inversions += b.inversions
        }
        #expect(with.delivered == without.delivered)
        #expect(with.lost == 0, "lost \(with.lost)")
        #expect(with.doubled <= without.doubled, "doubled \(with.doubled) with the hold, \(without.doubled) without")
        #expect(without.inversions > 0, "the cases do put events out of order without the hold")
        // Measured 2026-11-28: 372 with the hold, 883 without, of 93,960 events delivered. What is
        // left is not analysed yet (the model's stalls reach 1.5 s, longer than the hold).
        #expect(with.inversions * 2 <= without.inversions, "out of order: \(with.inversions) with the hold, \(without.inversions) without")
    }
}
