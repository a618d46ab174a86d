import TestSupport
import Testing

@testable import BridgeCore

/// The rate shaper of docs/contract.md §7.3, driven with a manual clock (`TestInstant`).
@Suite("RateShaper: throttle and on_change")
struct RateShaperTests {
    typealias Shaper = RateShaper<TestInstant, Int>

    static func at(_ milliseconds: Int64) -> TestInstant { .at(milliseconds: milliseconds) }

    /// What an offer came to, as a comparable value.
    enum Verdict: Equatable {
        case forward(Int), held(Int), unchanged, unshaped(Int)
    }

    static func verdict(_ offer: Shaper.Offer) -> Verdict {
        switch offer {
        case .forward(let message): .forward(message)
        case .held(let coalesced): .held(coalesced)
        case .unchanged: .unchanged
        case .forwardUnshaped(let message): .unshaped(message)
        }
    }

    static func payload(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("50 messages at 50 Hz with throttle 1 s: exactly one goes out per interval, the latest, at the interval's end")
    func fiftyHertzThrottledToOne() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        var released: [Int] = []
        var coalesced = 0
        for index in 0..<50 {
            let now = Self.at(Int64(index) * 20)
            released += shaper.due(now: now).releases.map(\.message)
            switch shaper.offer(index, target: "sensors/1", payload: Self.payload("\(index)"), now: now) {
            case .held(let count): coalesced += count
            default: Issue.record("every message of the interval is held")
            }
        }
        #expect(released.isEmpty)
        #expect(coalesced == 49)
        #expect(shaper.nextDeadline == Self.at(1000))
        #expect(shaper.due(now: Self.at(999)).releases.isEmpty)
        let due = shaper.due(now: Self.at(1000))
        #expect(due.releases.map(\.message) == [49])
        #expect(due.releases.map(\.target) == ["sensors/1"])
        #expect(due.unchanged == 0)
        #expect(shaper.nextDeadline == nil)
        #expect(shaper.heldCount == 0)
    }

    @Test("a steady 50 Hz stream for 5 s releases one message per second, each the last of its interval")
    func steadyStreamOnePerInterval() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        var released: [Int] = []
        var coalesced = 0
        for index in 0..<250 {
            let now = Self.at(Int64(index) * 20)
            released += shaper.due(now: now).releases.map(\.message)
            if case .held(let count) = shaper.offer(index, target: "t", payload: [], now: now) { coalesced += count }
        }
        released += shaper.due(now: Self.at(5000)).releases.map(\.message)
        // Intervals open at 0, 1000, 2000, … ms: the message at 1000 ms sees the first interval's
        // release (due runs first) and opens the next one.
        #expect(released == [49, 99, 149, 199, 249])
        #expect(coalesced == 250 - 5)
    }

    @Test("a message after a release opens a new interval from its own arrival")
    func newIntervalAfterQuiet() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        #expect(Self.verdict(shaper.offer(1, target: "t", payload: [], now: Self.at(0))) == .held(0))
        #expect(shaper.due(now: Self.at(1000)).releases.map(\.message) == [1])
        #expect(Self.verdict(shaper.offer(2, target: "t", payload: [], now: Self.at(2500))) == .held(0))
        #expect(shaper.nextDeadline == Self.at(3500))
        #expect(shaper.due(now: Self.at(3499)).releases.isEmpty)
        #expect(shaper.due(now: Self.at(3500)).releases.map(\.message) == [2])
    }

    @Test("throttle keeps targets apart: each target has its own interval and its own latest")
    func targetsIndependent() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        _ = shaper.offer(1, target: "a", payload: [], now: Self.at(0))
        _ = shaper.offer(2, target: "b", payload: [], now: Self.at(300))
        #expect(Self.verdict(shaper.offer(3, target: "a", payload: [], now: Self.at(600))) == .held(1))
        #expect(shaper.due(now: Self.at(1000)).releases.map(\.message) == [3])
        #expect(shaper.nextDeadline == Self.at(1300))
        #expect(shaper.due(now: Self.at(1300)).releases.map(\.message) == [2])
    }

    @Test("a message offered after its interval ended but before due ran replaces the held one and goes out at the next due")
    func offerAfterIntervalEndBeforeDue() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        _ = shaper.offer(1, target: "t", payload: [], now: Self.at(0))
        #expect(Self.verdict(shaper.offer(2, target: "t", payload: [], now: Self.at(1200))) == .held(1))
        #expect(shaper.due(now: Self.at(1200)).releases.map(\.message) == [2])
    }

    @Test("on_change alone: equal to the last forwarded payload is unchanged, a different one is forwarded at once")
    func onChangeAlone() {
        var shaper = Shaper(.init(throttle: nil, onChange: true))
        #expect(Self.verdict(shaper.offer(1, target: "t", payload: Self.payload("21.5"), now: Self.at(0))) == .forward(1))
        #expect(Self.verdict(shaper.offer(2, target: "t", payload: Self.payload("21.5"), now: Self.at(10))) == .unchanged)
        #expect(Self.verdict(shaper.offer(3, target: "u", payload: Self.payload("21.5"), now: Self.at(20))) == .forward(3))
        #expect(Self.verdict(shaper.offer(4, target: "t", payload: Self.payload("21.6"), now: Self.at(30))) == .forward(4))
        #expect(Self.verdict(shaper.offer(5, target: "t", payload: Self.payload("21.5"), now: Self.at(40))) == .forward(5))
        #expect(Self.verdict(shaper.offer(6, target: "t", payload: Self.payload("21.5"), now: Self.at(50))) == .unchanged)
        #expect(shaper.nextDeadline == nil)
        #expect(shaper.due(now: Self.at(60)).releases.isEmpty)
    }

    @Test("on_change compares long payloads by digest and short ones by bytes; an empty payload is a payload")
    func onChangeLongAndEmptyPayloads() {
        var shaper = Shaper(.init(throttle: nil, onChange: true))
        let long = Array(repeating: UInt8(ascii: "x"), count: 4096)
        var other = long
        other[4000] = UInt8(ascii: "y")
        #expect(Self.verdict(shaper.offer(1, target: "t", payload: long, now: Self.at(0))) == .forward(1))
        #expect(Self.verdict(shaper.offer(2, target: "t", payload: long, now: Self.at(1))) == .unchanged)
        #expect(Self.verdict(shaper.offer(3, target: "t", payload: other, now: Self.at(2))) == .forward(3))
        #expect(Self.verdict(shaper.offer(4, target: "t", payload: [], now: Self.at(3))) == .forward(4))
        #expect(Self.verdict(shaper.offer(5, target: "t", payload: [], now: Self.at(4))) == .unchanged)
        #expect(PayloadFingerprint(Array(repeating: 1, count: 32)) == .bytes(Array(repeating: 1, count: 32)))
        if case .bytes = PayloadFingerprint(Array(repeating: 1, count: 33)) {
            Issue.record("a payload over 32 bytes is remembered by digest")
        }
    }

    @Test("on_change with throttle: the comparison is made at release, against the last payload released")
    func onChangeWithThrottle() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: true))
        _ = shaper.offer(1, target: "t", payload: Self.payload("on"), now: Self.at(0))
        #expect(shaper.due(now: Self.at(1000)).releases.map(\.message) == [1])
        // Interval 2: "off" then back to "on" — only the latest counts, and it equals the last release.
        _ = shaper.offer(2, target: "t", payload: Self.payload("off"), now: Self.at(1100))
        #expect(Self.verdict(shaper.offer(3, target: "t", payload: Self.payload("on"), now: Self.at(1200))) == .held(1))
        let second = shaper.due(now: Self.at(2100))
        #expect(second.releases.isEmpty)
        #expect(second.unchanged == 1)
        // Interval 3: a real change is released.
        _ = shaper.offer(4, target: "t", payload: Self.payload("off"), now: Self.at(2200))
        let third = shaper.due(now: Self.at(3200))
        #expect(third.releases.map(\.message) == [4])
        #expect(third.unchanged == 0)
        // Interval 4: the same again is unchanged.
        _ = shaper.offer(5, target: "t", payload: Self.payload("off"), now: Self.at(3300))
        #expect(shaper.due(now: Self.at(4300)).unchanged == 1)
    }

    @Test("a quiet target is forgotten after max(throttle, 10 min): on_change then forwards the same payload again")
    func expiryForgetsQuietTargets() {
        var shaper = Shaper(.init(throttle: nil, onChange: true))
        #expect(shaper.memory == .seconds(600))
        _ = shaper.offer(1, target: "t", payload: Self.payload("x"), now: Self.at(0))
        _ = shaper.offer(2, target: "u", payload: Self.payload("x"), now: Self.at(300_000))
        #expect(Self.verdict(shaper.offer(3, target: "t", payload: Self.payload("x"), now: Self.at(599_999))) == .unchanged)
        #expect(shaper.targetCount == 2)
        // "t" was refreshed at 599.999 s, so at 900 s only "u" has been quiet for 10 min.
        _ = shaper.due(now: Self.at(900_000))
        #expect(shaper.targetCount == 1)
        _ = shaper.due(now: Self.at(1_199_998))
        #expect(shaper.targetCount == 1)
        _ = shaper.due(now: Self.at(1_199_999))
        #expect(shaper.targetCount == 0)
        #expect(Self.verdict(shaper.offer(4, target: "t", payload: Self.payload("x"), now: Self.at(1_200_000))) == .forward(4))
    }

    @Test("a throttle longer than 10 min sets the memory; a target holding a message is never forgotten")
    func expiryWithLongThrottle() {
        var shaper = Shaper(.init(throttle: .seconds(900), onChange: false))
        #expect(shaper.memory == .seconds(900))
        _ = shaper.offer(1, target: "t", payload: [], now: Self.at(0))
        // No due call at the interval's end: the held message keeps the target alive.
        _ = shaper.offer(2, target: "u", payload: [], now: Self.at(2_000_000))
        #expect(shaper.targetCount == 2)
        // Once released, "t" (quiet since 0) is forgotten; "u" still holds its message.
        #expect(shaper.due(now: Self.at(2_000_000)).releases.map(\.message) == [1])
        #expect(shaper.targetCount == 1)
        #expect(shaper.due(now: Self.at(2_899_999)).releases.isEmpty)
        #expect(shaper.targetCount == 1)
        // "u" is released at the end of its interval, when it has been quiet for 900 s.
        #expect(shaper.due(now: Self.at(2_900_000)).releases.map(\.message) == [2])
        #expect(shaper.targetCount == 0)
    }

    @Test("every quiet target is forgotten exactly 10 min after its own last message, whatever the order of arrivals")
    func expiryIsExactPerTarget() {
        var shaper = Shaper(.init(throttle: nil, onChange: true))
        _ = shaper.offer(1, target: "x", payload: [1], now: Self.at(0))
        _ = shaper.offer(2, target: "y", payload: [1], now: Self.at(500_000))
        _ = shaper.offer(3, target: "x", payload: [1], now: Self.at(550_000))
        _ = shaper.due(now: Self.at(1_099_999))
        #expect(shaper.targetCount == 2)
        _ = shaper.due(now: Self.at(1_100_000))
        #expect(shaper.targetCount == 1)
        #expect(Self.verdict(shaper.offer(4, target: "y", payload: [1], now: Self.at(1_100_000))) == .forward(4))
        #expect(Self.verdict(shaper.offer(5, target: "x", payload: [1], now: Self.at(1_149_999))) == .unchanged)
        _ = shaper.due(now: Self.at(1_149_999 + 600_000))
        #expect(shaper.targetCount == 0)
    }

    @Test("at maxTargets a new target is forwarded unshaped, never dropped; room frees up when targets expire")
    func capForwardsUnshaped() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: true, maxTargets: 2))
        #expect(Self.verdict(shaper.offer(1, target: "a", payload: [], now: Self.at(0))) == .held(0))
        #expect(Self.verdict(shaper.offer(2, target: "b", payload: [], now: Self.at(0))) == .held(0))
        #expect(Self.verdict(shaper.offer(3, target: "c", payload: [], now: Self.at(0))) == .unshaped(3))
        #expect(Self.verdict(shaper.offer(4, target: "c", payload: [], now: Self.at(1))) == .unshaped(4))
        #expect(Self.verdict(shaper.offer(5, target: "a", payload: [], now: Self.at(2))) == .held(1))
        #expect(shaper.targetCount == 2)
        #expect(shaper.due(now: Self.at(1000)).releases.map(\.message) == [5, 2])
        _ = shaper.due(now: Self.at(601_000))
        #expect(shaper.targetCount == 0)
        #expect(Self.verdict(shaper.offer(6, target: "c", payload: [], now: Self.at(601_000))) == .held(0))
    }

    @Test("releases across many targets come out in the order their intervals end; nextDeadline is always the earliest")
    func deadlineOrderAcrossManyTargets() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        // 1,000 targets opened in a scrambled order of arrival times within one second.
        let count = 1000
        var arrivals: [(target: Int, at: Int64)] = []
        for index in 0..<count { arrivals.append((index, Int64((index * 7919) % count))) }
        arrivals.sort { $0.at < $1.at }
        for arrival in arrivals {
            _ = shaper.offer(arrival.target, target: "t\(arrival.target)", payload: [], now: Self.at(arrival.at))
        }
        #expect(shaper.heldCount == count)
        #expect(shaper.nextDeadline == Self.at(1000))
        var released: [Int] = []
        var previous = Self.at(0)
        while let deadline = shaper.nextDeadline {
            #expect(deadline > previous)
            previous = deadline
            let due = shaper.due(now: deadline).releases
            #expect(due.count == 1)
            released += due.map(\.message)
        }
        #expect(released == arrivals.map(\.target))
        #expect(shaper.heldCount == 0)
    }

    @Test("several intervals ending at the same instant come out in the order they opened")
    func equalDeadlinesKeepOpeningOrder() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: false))
        for (index, target) in ["c", "a", "b"].enumerated() { _ = shaper.offer(index, target: target, payload: [], now: Self.at(0)) }
        #expect(shaper.due(now: Self.at(5000)).releases.map(\.target) == ["c", "a", "b"])
    }

    @Test("bad settings: a zero or negative throttle is off, maxTargets below 1 is 1, nothing configured forwards everything")
    func badSettings() {
        var zero = Shaper(.init(throttle: .zero, onChange: false, maxTargets: 0))
        #expect(zero.settings.throttle == nil)
        #expect(zero.settings.maxTargets == 1)
        #expect(Self.verdict(zero.offer(1, target: "t", payload: [], now: Self.at(0))) == .forward(1))
        #expect(Self.verdict(zero.offer(2, target: "t", payload: [], now: Self.at(0))) == .forward(2))
        #expect(zero.targetCount == 0)
        var negative = Shaper(.init(throttle: .seconds(-1), onChange: true, maxTargets: -5))
        #expect(negative.settings.throttle == nil)
        #expect(Self.verdict(negative.offer(1, target: "t", payload: [1], now: Self.at(0))) == .forward(1))
        #expect(Self.verdict(negative.offer(2, target: "u", payload: [1], now: Self.at(0))) == .unshaped(2))
        #expect(Self.verdict(negative.offer(3, target: "t", payload: [1], now: Self.at(0))) == .unchanged)
    }

    @Test("memory stays bounded under many short-lived targets: expired ones are pruned as time goes on")
    func manyShortLivedTargetsStayBounded() {
        var shaper = Shaper(.init(throttle: .seconds(1), onChange: true))
        // One new target every 100 ms for 30 simulated minutes: at most ~10 min worth (6,000) remembered.
        var most = 0
        for index in 0..<18_000 {
            let now = Self.at(Int64(index) * 100)
            _ = shaper.due(now: now)
            _ = shaper.offer(index, target: "device/\(index)", payload: [UInt8(index % 256)], now: now)
            most = max(most, shaper.targetCount)
        }
        #expect(most <= 6_011)
        #expect(most >= 6_000)
    }
}
