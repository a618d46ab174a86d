import Testing

@testable import PusherLocal

/// The server keep-alive rule, driven with a manual timeline.
struct ActivityMonitorTests {
    let t0 = ContinuousClock.now

    @Test func silentClientIsPingedThenClosed() {
        var monitor = ActivityMonitor(activityTimeout: .seconds(10), pongTimeout: .seconds(3), now: t0)
        #expect(monitor.deadline == t0 + .seconds(10))
        #expect(monitor.deadlineReached(now: t0 + .seconds(9)) == .none)
        #expect(monitor.deadlineReached(now: t0 + .seconds(10)) == .sendPing)
        #expect(monitor.deadline == t0 + .seconds(13))
        #expect(monitor.deadlineReached(now: t0 + .seconds(12)) == .none)
        #expect(monitor.deadlineReached(now: t0 + .seconds(13)) == .closeForInactivity)
    }

    @Test func anyFrameResetsTheTimer() {
        var monitor = ActivityMonitor(activityTimeout: .seconds(10), pongTimeout: .seconds(3), now: t0)
        monitor.receivedFrame(now: t0 + .seconds(8))
        #expect(monitor.deadlineReached(now: t0 + .seconds(10)) == .none)
        #expect(monitor.deadline == t0 + .seconds(18))
        #expect(monitor.deadlineReached(now: t0 + .seconds(18)) == .sendPing)
        // The pong (or any frame) cancels the pending close.
        monitor.receivedFrame(now: t0 + .seconds(19))
        #expect(monitor.deadlineReached(now: t0 + .seconds(21)) == .none)
        #expect(monitor.deadline == t0 + .seconds(29))
    }

    @Test func lateTimerStillPingsFirst() {
        var monitor = ActivityMonitor(activityTimeout: .seconds(1), pongTimeout: .seconds(1), now: t0)
        // A timer that fires very late must not skip the ping.
        #expect(monitor.deadlineReached(now: t0 + .seconds(100)) == .sendPing)
        #expect(monitor.deadlineReached(now: t0 + .seconds(101)) == .closeForInactivity)
    }
}
