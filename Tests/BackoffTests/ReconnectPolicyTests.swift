import Backoff
import Testing

@Suite struct ReconnectPolicyTests {
    let noJitter = ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(120), multiplier: 2, jitter: 0)

    @Test func sequenceWithoutJitterDoublesUpToTheCap() {
        let delays = (0..<10).map { noJitter.delay(attempt: $0, unitRandom: 0.5) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 64, 120, 120, 120].map { Duration.seconds($0) })
    }

    @Test func capHoldsForHugeAttemptCounts() {
        #expect(noJitter.delay(attempt: 10_000, unitRandom: 0) == .seconds(120))
        #expect(noJitter.delay(attempt: Int.max, unitRandom: 1) == .seconds(120))
    }

    @Test func jitterScalesWithinBounds() {
        let policy = ReconnectPolicy(initialDelay: .seconds(10), maxDelay: .seconds(100), multiplier: 2, jitter: 0.2)
        #expect(policy.delay(attempt: 0, unitRandom: 0) == .seconds(8))
        #expect(policy.delay(attempt: 0, unitRandom: 0.5) == .seconds(10))
        #expect(policy.delay(attempt: 0, unitRandom: 1) == .seconds(12))
        // Capped first, then jittered: at the cap the spread is 80…120 s.
        #expect(policy.delay(attempt: 20, unitRandom: 1) == .seconds(120))
        var generator = SplitMix64(seed: 7)
        for n in 0..<50 {
            let base = min(100.0, 10.0 * Double(1 << (n % 6)))
            for d in [policy.delay(attempt: n % 6, using: &generator), policy.delay(attempt: n % 6)] {
                #expect(d >= .seconds(base * 0.8) && d <= .seconds(base * 1.2))
            }
        }
    }

    /// Both the seeded and the system-random path really jitter. (A seeded generator rather than
    /// `SystemRandomNumberGenerator` for `using:`: an empty generator passed through the generic
    /// function crashes ThreadSanitizer, swiftlang/swift#66099.)
    @Test func jitterActuallySpreadsDelays() {
        let policy = ReconnectPolicy(jitter: 0.5)
        var generator = SplitMix64(seed: 42)
        var seeded = Set<Duration>()
        var system = Set<Duration>()
        for _ in 0..<20 {
            seeded.insert(policy.delay(attempt: 3, using: &generator))
            system.insert(policy.delay(attempt: 3))
        }
        #expect(seeded.count > 1)
        #expect(system.count > 1)
    }

    @Test func maxAttempts() {
        let unlimited = ReconnectPolicy()
        #expect(unlimited.allowsAttempt(1_000_000))
        let three = ReconnectPolicy(maxAttempts: 3)
        #expect(three.allowsAttempt(2))
        #expect(!three.allowsAttempt(3))
    }

    @Test func fractionalDelays() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(250), maxDelay: .seconds(1), multiplier: 1.5, jitter: 0)
        #expect(policy.delay(attempt: 1, unitRandom: 0) == .milliseconds(375))
        #expect(policy.delay(attempt: 5, unitRandom: 0) == .seconds(1))
    }

    @Test func validation() {
        #expect(ReconnectPolicy.default.problems.isEmpty)
        #expect(ReconnectPolicy(initialDelay: .zero).problems == ["initial_delay must be greater than 0"])
        #expect(ReconnectPolicy(initialDelay: .seconds(5), maxDelay: .seconds(1)).problems == ["max_delay must be at least initial_delay"])
        #expect(ReconnectPolicy(multiplier: 0.5).problems == ["multiplier must be a number ≥ 1"])
        #expect(ReconnectPolicy(jitter: 1.5).problems == ["jitter must be between 0 and 1"])
        #expect(ReconnectPolicy(maxAttempts: 0).problems == ["max_attempts must be at least 1"])
    }
}

/// A small seeded generator (SplitMix64) with state, so the generic `delay(attempt:using:)` gets a
/// real address for its inout access.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
