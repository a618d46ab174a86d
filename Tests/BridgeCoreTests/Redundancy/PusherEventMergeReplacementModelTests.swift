import TestSupport
import Testing

@testable import BridgeCore

/// The merge through the pattern of a `[bridge.pusher]` reload with two connections
/// (`BridgeRuntime.replacePusherSide`): connection 0 is closed and a new connection takes its
/// index, and as soon as the new one holds every channel connection 1 is closed and replaced too;
/// several reloads in a row, under a load that stalls a connection's task now and then. Every
/// event has its own payload, so nothing may be lost or doubled.
@Suite("PusherEventMerge through staggered replacements")
struct PusherEventMergeReplacementModelTests {
    typealias Arrival = PusherEventMergeModelTests.Arrival

    /// One connection index's arrivals over its successive connections, in its own order.
    struct Slot {
        var arrivals: [Arrival] = []
    }

    struct Scenario {
        var published: [[Int64]]
        var slots: [Slot]
    }

    /// One connection's period: subscriptions registered at `registered` (+0–5 ms per channel),
    /// closed at the server at `ends`, with a latency and maybe a stall. Returns its arrivals (the
    /// down last) and when each channel's subscription arrived.
    static func period(
        registered: Int64, ends: Int64, published: [[Int64]], random: inout SplitMix64
    ) -> (arrivals: [Arrival], allLiveAt: Int64) {
        let latency = Int64(random.int(0...20))
        var stall: (from: Int64, to: Int64)?
        if random.chance(40) {
            // Where the stall falls does not depend on `ends` (so when a period is all live can be
            // known before it ends).
            let from = registered + Int64(random.int(0...1500))
            stall = (from, from + Int64(random.int(50...800)))
        }
        func arrival(_ time: Int64) -> Int64 {
            guard let stall, time >= stall.from, time < stall.to else { return time }
            return stall.to
        }
        var arrivals: [Arrival] = []
        var allLiveAt = registered
        for channel in published.indices {
            let subscribed = registered + Int64(random.int(0...5))
            let liveAt = arrival(subscribed + latency)
            allLiveAt = max(allLiveAt, liveAt)
            arrivals.append(Arrival(at: liveAt, what: .live(channel: channel, registered: subscribed)))
            for (index, time) in published[channel].enumerated() where time >= subscribed && time < ends {
                arrivals.append(Arrival(at: arrival(time + latency), what: .event(channel: channel, index: index)))
            }
        }
        let sorted = arrivals.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
        let downAt = max(arrival(ends + latency), sorted.last?.at ?? 0) + 1
        return (sorted + [Arrival(at: downAt, what: .down)], allLiveAt)
    }

    /// Each reload starts a second after the previous one ended (the e2e test's pace, plus up to
    /// 300 ms): connection 0 closed, its successor registered 2–30 ms after its down was seen;
    /// connection 1 closed 0–3 ms after that successor holds every channel, and replaced alike.
    static func scenario(seed: UInt64) -> Scenario {
        var random = SplitMix64(seed: seed)
        let channels = random.int(1...6)
        let horizon: Int64 = 9000
        var published: [[Int64]] = []
        for channel in 0..<channels {
            var time = Int64(channel * 7)
            var times: [Int64] = []
            while time < horizon {
                times.append(time)
                time += Int64(random.int(20...80))
            }
            published.append(times)
        }
        var slots = [Slot(), Slot()]
        // Each slot's running connection: registered when, and the seed of its latency and stall.
        var current: [(registered: Int64, seed: UInt64)] = [(0, random.next()), (Int64(random.int(0...30)), random.next())]
        func close(_ slot: Int, at ends: Int64) -> Int64 {
            var generator = SplitMix64(seed: current[slot].seed)
            let old = period(registered: current[slot].registered, ends: ends, published: published, random: &generator)
            slots[slot].arrivals += old.arrivals
            return old.arrivals.last!.at
        }
        func allLive(_ slot: Int) -> Int64 {
            var generator = SplitMix64(seed: current[slot].seed)
            return period(registered: current[slot].registered, ends: current[slot].registered, published: published, random: &generator)
                .allLiveAt
        }
        var reload = max(allLive(0), allLive(1)) + Int64(random.int(1000...1300))
        while reload < horizon - 1500 {
            let down0 = close(0, at: reload)
            current[0] = (down0 + Int64(random.int(2...30)), random.next())
            let down1 = close(1, at: allLive(0) + Int64(random.int(0...3)))
            current[1] = (down1 + Int64(random.int(2...30)), random.next())
            reload = allLive(1) + Int64(random.int(1000...1300))
        }
        _ = close(0, at: horizon)
        _ = close(1, at: horizon)
        return Scenario(published: published, slots: slots)
    }

    struct Tally: Equatable {
        var delivered = 0
        var lost = 0
        var doubled = 0
    }

    static func run(seed: UInt64) -> Tally {
        let scenario = scenario(seed: seed)
        let t0 = ContinuousClock.now
        var merge = PusherEventMerge(connections: 2, limits: .bridge)
        let channels = scenario.published.count
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
        let model = PusherEventMergeModelTests.Scenario(
            connections: 2, keys: scenario.published.map { Array($0.indices) }, published: scenario.published,
            arrivals: scenario.slots.map(\.arrivals))
        var nextHousekeeping: Int64 = 1000
        var last = t0
        for (connection, arrival) in model.interleaved(seed: seed) {
            while arrival.at >= nextHousekeeping {
                merge.expire(now: t0 + .milliseconds(nextHousekeeping))
                takeReleased()
                nextHousekeeping += 1000
            }
            let now = t0 + .milliseconds(arrival.at)
            last = now
            switch arrival.what {
            case .live(let channel, _):
                merge.connectionLive(connection, channel: "c\(channel)", now: now)
            case .event(let channel, let index):
                let key = PusherEventKey(name: "e", data: "k\(channel)-\(index)", userID: nil)
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
            let lost = delivered[channel].filter { counts[$0] == nil }.sorted()
            tally.lost += lost.count
            tally.doubled += counts.values.filter { $0 > 1 }.reduce(0) { $0 + $1 - 1 }
        }
        return tally
    }

    @Test func staggeredReplacementsLoseNothingAndDoubleNothing() {
        // Expected: nothing lost, nothing doubled, on every case. Measured 2026-11-28: none lost
        // and none doubled in 2,000 cases (38 s); 300 cases here keep the suite short.
        var total = Tally()
        var failing: [UInt64] = []
        for seed in UInt64(1)...300 {
            let tally = Self.run(seed: seed)
            total.delivered += tally.delivered
            total.lost += tally.lost
            total.doubled += tally.doubled
            if tally.lost > 0 || tally.doubled > 0 { failing.append(seed) }
        }
        #expect(
            total.lost == 0 && total.doubled == 0,
            "lost \(total.lost), doubled \(total.doubled) of \(total.delivered); seeds \(failing.prefix(10))")
    }
}
