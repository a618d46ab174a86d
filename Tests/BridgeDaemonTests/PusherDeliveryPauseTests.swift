import BridgeCore
import Locking
import PusherChannels
import Testing

@testable import BridgeDaemon

/// The 403 pause shared by the MQTT → Pusher lanes (docs/contract.md §7.3).
@Suite("PusherDeliveryPause: one pause for every lane, one log line on pause and on resume")
struct PusherDeliveryPauseTests {
    let t0 = ContinuousClock.now

    /// A pause on the runtime's one lock, as a bridge has it (the decisions are the supervisor's).
    static func makePause() throws -> PusherDeliveryPause {
        let settings = try #require(
            ConfigLoader.parse(
                DiscoveryRuntimeTests.config, file: "b.conf",
                environment: .init(variables: [:], readFile: { _ in nil }, fileExists: { _ in false })
            ).bridges.first)
        let supervisor = BridgeSupervisor(settings: settings, incarnation: "0", startedAt: 0)
        return PusherDeliveryPause(decisions: Locked(RuntimeDecisions(supervisor: supervisor)))
    }

    @Test("the first refusal pauses, later ones only update the reason; the first acceptance resumes, later ones change nothing")
    func transitions() throws {
        let pause = try Self.makePause()
        #expect(pause.reason == nil)
        #expect(pause.accepted(now: t0) == .none)
        #expect(pause.refused(reason: "403: over quota", now: t0) == .paused)
        #expect(pause.refused(reason: "403: app disabled", now: t0 + .seconds(1)) == .none)
        #expect(pause.reason == "403: app disabled")
        #expect(pause.accepted(now: t0 + .seconds(10)) == .resumed(after: .seconds(10)))
        #expect(pause.reason == nil)
        #expect(pause.accepted(now: t0 + .seconds(11)) == .none)
    }

    @Test("a lane does not wait while delivery runs")
    func noWaitWhenRunning() async throws {
        let pause = try Self.makePause()
        let start = ContinuousClock.now
        await pause.waitWhilePaused(upTo: .seconds(3600))
        #expect(ContinuousClock.now - start < .seconds(120))
    }

    @Test("a waiting lane is woken by another lane's accepted batch long before the cap")
    func resumeWakesWaitingLanes() async throws {
        let pause = try Self.makePause()
        _ = pause.refused(reason: "403", now: .now)
        let start = ContinuousClock.now
        // A cap of an hour: only the resume can end the wait within the bound, even on a machine
        // so loaded that the test's own wake-ups take seconds (seen in the full parallel run).
        async let waited: Void = pause.waitWhilePaused(upTo: .seconds(3600))
        try? await Task.sleep(for: .milliseconds(50))
        _ = pause.accepted(now: .now)
        await waited
        #expect(ContinuousClock.now - start < .seconds(120))
    }

    @Test("a waiting lane tries again at the cap when nothing resumes, or when the bridge stops")
    func capAndStopEndTheWait() async throws {
        let pause = try Self.makePause()
        _ = pause.refused(reason: "403", now: .now)
        let start = ContinuousClock.now
        await pause.waitWhilePaused(upTo: .milliseconds(100))
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(100))
        #expect(waited < .seconds(120))
        let stopStart = ContinuousClock.now
        await pause.waitWhilePaused(upTo: .seconds(3600), stop: { true })
        #expect(ContinuousClock.now - stopStart < .seconds(120))
        #expect(pause.reason == "403", "the wait ends, the pause stays")
    }

    @Test("a stopping bridge wakes its waiting lanes at once, and no lane waits after that")
    func stoppingWakesWaitingLanes() async throws {
        let pause = try Self.makePause()
        _ = pause.refused(reason: "403", now: .now)
        let start = ContinuousClock.now
        // A cap of an hour: only the wake-up can end the wait within the bound.
        async let waited: Void = pause.waitWhilePaused(upTo: .seconds(3600))
        try? await Task.sleep(for: .milliseconds(50))
        pause.wakeAll()
        await waited
        #expect(ContinuousClock.now - start < .seconds(120))
        let after = ContinuousClock.now
        await pause.waitWhilePaused(upTo: .seconds(3600))
        #expect(ContinuousClock.now - after < .seconds(120))
        #expect(pause.reason == "403", "the wait ends, the pause stays")
    }

    @Test("an HTTP answer keeps its status and body for the core to decide (403 pauses, 400 dead-letters); no answer is a network error")
    func httpErrorsReachTheCoreWithTheirStatus() {
        #expect(PusherBatchAttempt(.status(403, body: "Over quota")) == .status(403, body: "Over quota"))
        #expect(PusherBatchAttempt(.status(400, body: "bad")) == .status(400, body: "bad"))
        #expect(PusherBatchAttempt(.status(503, body: "down")) == .status(503, body: "down"))
        #expect(PusherBatchAttempt(.network("refused")) == .networkError("HTTP request failed: refused"))
        #expect(PusherBatchAttempt(.invalidRequest("too big")) == .unsendable(status: 0, body: "too big"))
    }
}
