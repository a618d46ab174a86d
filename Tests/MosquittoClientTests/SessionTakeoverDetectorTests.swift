import Testing

@testable import MosquittoClient

/// The session takeover pattern, driven with a manual clock: what a second process with the same
/// client id looks like from here, and what only looks similar (docs/contract.md §7.4).
@Suite struct SessionTakeoverDetectorTests {
    let t0 = ContinuousClock.now
    /// libmosquitto's "connection lost" (what mosquitto 2.0.11's takeover looks like).
    let connectionLost = 7

    func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

    /// Connected at `connectedAt`, lost at `lostAt`.
    func flap(_ detector: inout MQTTSessionTakeoverDetector, _ connectedAt: Double, _ lostAt: Double, code: Int? = 7)
        -> MQTTSessionTakeoverDetector.Decision
    {
        detector.connected(now: at(connectedAt))
        return detector.disconnected(reasonCode: code, now: at(lostAt))
    }

    @Test func aSingleLostConnectionIsNoTakeover() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 1) == .none)
        #expect(!detector.isSuspected(now: at(1)))
        detector.connected(now: at(2))
        #expect(!detector.isSuspected(now: at(3)))
    }

    @Test func threeQuickLossesAfterConnackAreATakeover() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 2) == .none)
        #expect(flap(&detector, 2.2, 4.1) == .none)
        #expect(flap(&detector, 4.5, 6.5) == .takeoverPattern(losses: 3, within: .milliseconds(4500)))
        #expect(detector.isSuspected(now: at(7)))
        // Reported once per episode: the flapping goes on, nothing new to say.
        #expect(flap(&detector, 7, 8) == .none)
        #expect(flap(&detector, 9, 10) == .none)
        #expect(flap(&detector, 11, 12) == .none)
        #expect(detector.isSuspected(now: at(13)))
    }

    /// The process that was connected first loses a long connection, then two short ones: it
    /// completes the run half a flap before the newcomer, whose losses are all short.
    @Test func theFirstLossOfARunMayFollowALongConnection() {
        var older = MQTTSessionTakeoverDetector()
        #expect(flap(&older, 0, 600) == .none)
        #expect(flap(&older, 601, 602) == .none)
        #expect(flap(&older, 604, 606) == .takeoverPattern(losses: 3, within: .seconds(6)))
    }

    @Test func aLongConnectionInTheMiddleStartsTheRunOver() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 1) == .none)
        #expect(flap(&detector, 2, 3) == .none)
        #expect(flap(&detector, 4, 14) == .none, "up 10 s: not taken over right after CONNACK")
        #expect(flap(&detector, 15, 16) == .none)
        #expect(flap(&detector, 17, 18) == .takeoverPattern(losses: 3, within: .seconds(4)))
    }

    @Test func slowLossesMinutesApartAreNoTakeover() {
        var detector = MQTTSessionTakeoverDetector()
        for minute in 0..<10 {
            let start = Double(minute * 120)
            // A connection that drops after a second, once every two minutes: a flaky network.
            #expect(flap(&detector, start + 100, start + 101) == .none, "minute \(minute)")
        }
        #expect(!detector.isSuspected(now: at(1300)))
    }

    @Test func lossesSpreadWiderThanTheWindowAreNoTakeover() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 1) == .none)
        #expect(flap(&detector, 17, 18) == .none)
        #expect(flap(&detector, 34, 35) == .none, "the first loss is 34 s old: outside the 30 s window")
        #expect(flap(&detector, 36, 37) == .takeoverPattern(losses: 3, within: .seconds(19)))
    }

    /// A broker restart: the connection is lost, attempts fail while it is down, then it accepts
    /// again — and even if it then drops a fresh connection or two, the failed attempts reset the run.
    @Test func aBrokerRestartIsNoTakeover() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 1) == .none)
        #expect(flap(&detector, 1.2, 2) == .none)
        for second in 3...8 {
            #expect(detector.disconnected(reasonCode: 14, now: at(Double(second))) == .none, "connection refused")
        }
        #expect(flap(&detector, 9, 10) == .none)
        #expect(flap(&detector, 10.5, 11) == .none)
        #expect(detector.disconnected(reasonCode: 14, now: at(12)) == .none)
        #expect(flap(&detector, 13, 14) == .none)
        #expect(!detector.isSuspected(now: at(15)))
    }

    /// A broker that says why it closed (0x8B server shutting down, 0x87 not authorised) and this
    /// client's own keep-alive timeout are no takeover, and start the run over.
    @Test func lossesWithAnotherReasonAreNoTakeover() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 1) == .none)
        #expect(flap(&detector, 1.5, 2, code: 0x8B) == .none, "server shutting down")
        #expect(flap(&detector, 2.5, 3) == .none)
        #expect(flap(&detector, 3.5, 4, code: 19) == .none, "keep-alive timeout")
        #expect(flap(&detector, 4.5, 5) == .none)
        #expect(flap(&detector, 5.5, 6, code: 0x87) == .none, "not authorised")
        #expect(flap(&detector, 6.5, 7, code: nil) == .none)
        #expect(!detector.isSuspected(now: at(8)))
        // Plain lost connections (code 7, or no code) make the run.
        #expect(flap(&detector, 7.5, 8, code: nil) == .none)
        #expect(flap(&detector, 8.5, 9) == .takeoverPattern(losses: 3, within: .seconds(2)))
    }

    @Test func reason0x8EIsATakeoverAtOnce() {
        var detector = MQTTSessionTakeoverDetector()
        #expect(flap(&detector, 0, 600, code: MQTTSessionTakeoverDetector.sessionTakenOverReason) == .takenOver)
        #expect(detector.isSuspected(now: at(601)))
        #expect(flap(&detector, 601, 602, code: 0x8E) == .none, "reported once")
    }

    @Test func anEpisodeEndsAfterAConnectionStaysUpForClearAfter() {
        var detector = MQTTSessionTakeoverDetector()
        _ = flap(&detector, 0, 1)
        _ = flap(&detector, 2, 3)
        #expect(flap(&detector, 4, 5) != .none)
        // The other process is gone: the next connection stays.
        detector.connected(now: at(6))
        #expect(detector.isSuspected(now: at(35)))
        #expect(!detector.isSuspected(now: at(36)))
        // Lost after a long stable connection: the old episode is over, a new one is reported again.
        #expect(flap(&detector, 36, 100) == .none)
        #expect(!detector.isSuspected(now: at(100)))
        #expect(flap(&detector, 101, 102) == .none)
        #expect(flap(&detector, 103, 104) == .takeoverPattern(losses: 3, within: .seconds(4)))
    }

    /// Bad input: a disconnect without any connect, repeated; thresholds below the minimum.
    @Test func disconnectsWithoutAConnectionAndTinyThresholdsAreHandled() {
        var detector = MQTTSessionTakeoverDetector()
        for second in 0..<100 {
            #expect(detector.disconnected(reasonCode: nil, now: at(Double(second))) == .none)
        }
        #expect(!detector.isSuspected(now: at(100)))
        // `losses` below 2 would make every single loss a takeover: raised to 2.
        var strict = MQTTSessionTakeoverDetector(thresholds: .init(losses: 0))
        #expect(strict.thresholds.losses == 2)
        #expect(flap(&strict, 0, 1) == .none)
        #expect(flap(&strict, 2, 3) == .takeoverPattern(losses: 2, within: .seconds(2)))
    }
}
