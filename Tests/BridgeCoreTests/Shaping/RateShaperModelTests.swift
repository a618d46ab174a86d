import TestSupport
import Testing

@testable import BridgeCore

/// The rate shaper against a naive model of docs/contract.md §7.3 (full scans, bytes kept), on
/// seeded random traffic: every verdict, release, `unchanged` count, target count and deadline
/// must agree.
@Suite("RateShaper against a naive model")
struct RateShaperModelTests {
    /// Seeded (TestSupport), so a failure repeats.
    typealias SplitMix = SplitMix64

    /// The semantics written out plainly: every call scans every target.
    struct Model {
        struct Target {
            var held: (message: Int, payload: [UInt8])?
            var end: Int64 = 0
            var opened = 0
            var last: [UInt8]?
            var lastSeen: Int64
        }

        let throttle: Int64?
        let onChange: Bool
        let memory: Int64
        let maxTargets: Int
        var targets: [String: Target] = [:]
        var opened = 0

        mutating func forget(now: Int64) {
            targets = targets.filter { $0.value.held != nil || $0.value.lastSeen + memory > now }
        }

        mutating func due(now: Int64) -> ([Int], Int) {
            let ready = targets.filter { $0.value.held != nil && $0.value.end <= now }
                .sorted { ($0.value.end, $0.value.opened) < ($1.value.end, $1.value.opened) }
            var released: [Int] = []
            var unchanged = 0
            for (name, target) in ready {
                guard let held = target.held else { continue }
                if onChange, target.last == held.payload {
                    unchanged += 1
                } else {
                    released.append(held.message)
                    targets[name]?.last = held.payload
                }
                targets[name]?.held = nil
            }
            forget(now: now)
            return (released, unchanged)
        }

        mutating func offer(_ message: Int, target name: String, payload: [UInt8], now: Int64) -> RateShaperTests.Verdict {
            guard throttle != nil || onChange else { return .forward(message) }
            forget(now: now)
            var target: Target
            if let known = targets[name] {
                target = known
            } else {
                guard targets.count < maxTargets else { return .unshaped(message) }
                target = Target(lastSeen: now)
            }
            target.lastSeen = now
            defer { targets[name] = target }
            if let throttle {
                if target.held != nil {
                    target.held = (message, payload)
                    return .held(1)
                }
                target.held = (message, payload)
                target.end = now + throttle
                target.opened = opened
                opened += 1
                return .held(0)
            }
            if target.last == payload { return .unchanged }
            target.last = payload
            return .forward(message)
        }

        var nextDeadline: Int64? { targets.values.filter { $0.held != nil }.map(\.end).min() }
    }

    struct Case: Sendable, CustomStringConvertible {
        var throttleMilliseconds: Int64?
        var onChange: Bool
        var maxTargets: Int
        var seed: UInt64
        var description: String {
            "throttle \(throttleMilliseconds.map(String.init) ?? "off") ms, on_change \(onChange), cap \(maxTargets)"
        }
    }

    static let cases: [Case] = [
        Case(throttleMilliseconds: 1000, onChange: false, maxTargets: 10_000, seed: 1),
        Case(throttleMilliseconds: nil, onChange: true, maxTargets: 10_000, seed: 2),
        Case(throttleMilliseconds: 1000, onChange: true, maxTargets: 10_000, seed: 3),
        Case(throttleMilliseconds: 250, onChange: true, maxTargets: 5, seed: 4),
        Case(throttleMilliseconds: 700_000, onChange: true, maxTargets: 8, seed: 5),
        Case(throttleMilliseconds: nil, onChange: false, maxTargets: 3, seed: 6),
    ]

    @Test("random traffic over 12 targets with quiet gaps past the memory: the shaper and the model agree at every step", arguments: cases)
    func agreesWithTheModel(_ testCase: Case) {
        let throttle = testCase.throttleMilliseconds.map { Duration.milliseconds($0) }
        var shaper = RateShaper<TestInstant, Int>(.init(throttle: throttle, onChange: testCase.onChange, maxTargets: testCase.maxTargets))
        var model = Model(
            throttle: testCase.throttleMilliseconds, onChange: testCase.onChange,
            memory: max(testCase.throttleMilliseconds ?? 0, 600_000), maxTargets: testCase.maxTargets)
        var random = SplitMix(seed: testCase.seed)
        let payloads: [[UInt8]] = [[], [1], [2], Array(repeating: 7, count: 40), Array(repeating: 7, count: 39) + [8]]
        var now: Int64 = 0
        for message in 0..<6000 {
            if Int.random(in: 0..<10, using: &random) > 0 { now += Int64.random(in: 1...300, using: &random) }  // else the same instant
            if Int.random(in: 0..<300, using: &random) == 0 {
                // A quiet gap: just short of the memory, exactly it, just past it, or anything.
                let gaps = [model.memory - 1, model.memory, model.memory + 1, Int64.random(in: 300_000...900_000, using: &random)]
                now += gaps[Int.random(in: 0..<gaps.count, using: &random)]
            }
            let instant = TestInstant.at(milliseconds: now)
            let due = shaper.due(now: instant)
            let expectedDue = model.due(now: now)
            #expect(due.releases.map(\.message) == expectedDue.0, "releases at \(now) ms")
            #expect(due.unchanged == expectedDue.1, "unchanged at \(now) ms")
            let target = "t\(Int.random(in: 0..<12, using: &random))"
            let payload = payloads[Int.random(in: 0..<payloads.count, using: &random)]
            let verdict = RateShaperTests.verdict(shaper.offer(message, target: target, payload: payload, now: instant))
            #expect(verdict == model.offer(message, target: target, payload: payload, now: now), "message \(message) at \(now) ms")
            #expect(shaper.targetCount == model.targets.count, "targets at \(now) ms")
            #expect(shaper.nextDeadline == model.nextDeadline.map { TestInstant.at(milliseconds: $0) }, "deadline at \(now) ms")
            if shaper.targetCount != model.targets.count { return }  // one report, not thousands
        }
    }
}

@Suite("RecencyList: the order of last touch")
struct RecencyListTests {
    @Test("touching moves an entry to the newest end; the oldest goes first; freed slots are reused")
    func orderAndReuse() {
        var list = RecencyList<String, Int>()
        #expect(list.oldest == nil)
        list.removeOldest()  // empty: nothing happens
        list.touch("a", 1)
        list.touch("b", 2)
        list.touch("c", 3)
        list.touch("a", 10)
        #expect(list.oldest?.key == "b")
        list.update("b", 20)  // no touch
        #expect(list.oldest?.key == "b" && list.oldest?.value == 20)
        list.update("zz", 1)  // absent: nothing happens
        #expect(list.count == 3)
        list.removeOldest()
        #expect(list.oldest?.key == "c")
        #expect(list["b"] == nil && list["a"] == 10)
        list.touch("d", 4)  // reuses b's slot
        list.removeOldest()
        list.removeOldest()
        #expect(list.oldest?.key == "d")
        list.removeOldest()
        #expect(list.count == 0 && list.oldest == nil)
        list.touch("e", 5)
        #expect(list.oldest?.key == "e" && list.count == 1)
    }
}
