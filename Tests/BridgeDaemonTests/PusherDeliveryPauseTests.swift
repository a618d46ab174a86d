import BridgeCore
import PusherChannels
import Testing

@testable import BridgeDaemon

/// The 403 pause shared by the MQTT → Pusher lanes (docs/contract.md §7.3).
@Suite("PusherDeliveryPause: one pause for every lane, one log line on pause and on resume")
struct PusherDeliveryPauseTests {
    let t0 = ContinuousClock.now

    @Test("the first refusal pauses, later ones only update the reason; the first acceptance resumes, later ones change nothing")
    func transitions() {
        let pause = PusherDeliveryPause()
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
    func noWaitWhenRunning() async {
        let pause = PusherDeliveryPause()
        let start = ContinuousClock.now
        await pause.waitWhilePaused(upTo: .seconds(3600))
        #expect(ContinuousClock.now - start < .seconds(120))
    }

    @Test("a waiting lane is woken by another lane's accepted batch long before the cap")
    func resumeWakesWaitingLanes() async {
        let pause = PusherDeliveryPause(checkInterval: .milliseconds(10))
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
    func capAndStopEndTheWait() async {
        let pause = PusherDeliveryPause(checkInterval: .milliseconds(10))
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

    @Test("an HTTP answer keeps its status and body for the core to decide (403 pauses, 400 dead-letters); no answer is a network error")
    func httpErrorsReachTheCoreWithTheirStatus() {
        #expect(PusherBatchAttempt(.status(403, body: "Over quota")) == .status(403, body: "Over quota"))
        #expect(PusherBatchAttempt(.status(400, body: "bad")) == .status(400, body: "bad"))
        #expect(PusherBatchAttempt(.status(503, body: "down")) == .status(503, body: "down"))
        #expect(PusherBatchAttempt(.network("refused")) == .networkError("HTTP request failed: refused"))
        #expect(PusherBatchAttempt(.invalidRequest("too big")) == .unsendable(status: 0, body: "too big"))
    }
}
