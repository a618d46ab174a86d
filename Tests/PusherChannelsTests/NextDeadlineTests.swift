import Backoff
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// The machine's ``PusherConnectionStateMachine/nextDeadline`` after each kind of event: the
/// client's timer sleeps exactly until it, so every deadline the machine acts on in `tick`
/// must be reported here, and none it does not.
@Suite struct NextDeadlineTests {
    @Test func idleHasNoDeadline() {
        let machine = makeMachine()
        #expect(machine.nextDeadline == nil)
    }

    @Test func connectingWaitsForTheHandshakeTimeout() {
        var machine = makeMachine()
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        #expect(machine.nextDeadline == clock.t0 + .seconds(10))
        // Frames before connection_established do not move it.
        clock.advance(.seconds(3))
        _ = machine.receivedFrame(PusherFrame(event: "pusher:error", data: #"{"message":"x"}"#), now: clock.now)
        #expect(machine.nextDeadline == clock.t0 + .seconds(10))
        // At the deadline tick drops the connection; nothing is due while it closes.
        clock.advance(.seconds(7))
        #expect(machine.tick(now: clock.now).contains(.closeTransport))
        #expect(machine.nextDeadline == nil)
    }

    @Test func connectedUsesTheEffectiveActivityTimeoutFromTheLastFrame() {
        var machine = makeMachine(activity: .seconds(120))
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        clock.advance(.seconds(1))
        _ = machine.receivedFrame(established("1.1", activity: 20), now: clock.now)
        #expect(machine.nextDeadline == clock.now + .seconds(20))
        // Any frame, even a malformed one, restarts the silence.
        clock.advance(.seconds(5))
        _ = machine.receivedFrame(PusherFrame(event: "news-item", data: "{}"), now: clock.now)
        #expect(machine.nextDeadline == clock.now + .seconds(20))
        clock.advance(.seconds(5))
        _ = machine.receivedMalformedFrame(PusherFrameError(message: "bad"), now: clock.now)
        #expect(machine.nextDeadline == clock.now + .seconds(20))
    }

    @Test func pingSentWaitsForThePongTimeoutAndAnyFrameEndsIt() {
        var machine = makeMachine(activity: .seconds(60), pong: .seconds(15))
        var clock = ManualClock()
        connect(&machine, clock)
        clock.advance(.seconds(60))
        #expect(machine.tick(now: clock.now) == [.send(#"{"event":"pusher:ping","data":{}}"#)])
        let pingAt = clock.now
        #expect(machine.nextDeadline == pingAt + .seconds(15))
        // A tick before the pong deadline changes nothing.
        clock.advance(.seconds(10))
        #expect(machine.tick(now: clock.now) == [])
        #expect(machine.nextDeadline == pingAt + .seconds(15))
        // The pong (any frame) answers the ping: back to the activity deadline.
        _ = machine.receivedFrame(PusherFrame(event: "pusher:pong"), now: clock.now)
        #expect(machine.nextDeadline == clock.now + .seconds(60))
    }

    @Test func pongTimeoutLeavesNoDeadlineUntilTheTransportEnds() {
        var machine = makeMachine(activity: .seconds(60), pong: .seconds(15))
        var clock = ManualClock()
        connect(&machine, clock)
        clock.advance(.seconds(60))
        _ = machine.tick(now: clock.now)
        clock.advance(.seconds(15))
        #expect(machine.tick(now: clock.now).contains(.closeTransport))
        #expect(machine.nextDeadline == nil)
        // Once closed, a reconnect "at once" is due within the spread.
        let actions = machine.transportClosed(code: nil, now: clock.now)
        let delays = reconnectDelays(in: actions)
        #expect(delays.count == 1)
        if let delay = delays.first, delay > .zero {
            #expect(machine.nextDeadline == clock.now + delay)
        }
    }

    @Test func waitingForReconnectIsDueAfterTheBackoffDelay() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(2), jitter: 0))
        var clock = ManualClock()
        connect(&machine, clock)
        clock.advance(.seconds(1))
        let actions = machine.transportClosed(code: 1006, now: clock.now)
        #expect(reconnectDelays(in: actions) == [.seconds(2)])
        #expect(machine.connectionState == .reconnecting)
        #expect(machine.nextDeadline == clock.now + .seconds(2))
        // When it passes, the new attempt has its own handshake deadline.
        clock.advance(.seconds(2))
        #expect(machine.tick(now: clock.now).contains(.openTransport))
        #expect(machine.nextDeadline == clock.now + .seconds(10))
    }

    @Test func disconnectingAndDisconnectedHaveNoDeadline() {
        var machine = makeMachine()
        let clock = ManualClock()
        connect(&machine, clock)
        #expect(machine.nextDeadline != nil)
        _ = machine.disconnectRequested(now: clock.now)
        #expect(machine.connectionState == .disconnecting)
        #expect(machine.nextDeadline == nil)
        _ = machine.transportClosed(code: 1000, now: clock.now)
        #expect(machine.connectionState == .disconnected)
        #expect(machine.nextDeadline == nil)
    }

    @Test func disconnectWhileWaitingCancelsTheReconnectDeadline() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(2), jitter: 0))
        let clock = ManualClock()
        connect(&machine, clock)
        _ = machine.transportClosed(code: 1006, now: clock.now)
        #expect(machine.nextDeadline != nil)
        _ = machine.disconnectRequested(now: clock.now)
        #expect(machine.nextDeadline == nil)
    }
}

/// When the client's timer is woken before its deadline (``DeadlineTimer``).
@Suite struct DeadlineTimerTests {
    @Test func aFirstDeadlineWakesATimerThatHasNone() {
        let clock = ManualClock()
        var timer = DeadlineTimer()
        #expect(timer.deadlineChanged(to: nil) == false)
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(10)) == true)
        #expect(timer.armedFor == clock.t0 + .seconds(10))
        // The same deadline again: already woken for it.
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(10)) == false)
    }

    @Test func onlyAnEarlierDeadlineWakesTheTimer() {
        let clock = ManualClock()
        var timer = DeadlineTimer()
        timer.armed(for: clock.t0 + .seconds(30))
        // Later (a frame pushed the activity deadline back) or gone: no wake-up.
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(31)) == false)
        #expect(timer.deadlineChanged(to: nil) == false)
        #expect(timer.armedFor == clock.t0 + .seconds(30))
        // Earlier (a reconnect scheduled sooner): wake once.
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(1)) == true)
        #expect(timer.armedFor == clock.t0 + .seconds(1))
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(2)) == false)
    }

    @Test func reArmingForNoDeadlineMakesTheNextOneWake() {
        let clock = ManualClock()
        var timer = DeadlineTimer()
        timer.armed(for: clock.t0 + .seconds(5))
        timer.armed(for: nil)
        #expect(timer.deadlineChanged(to: clock.t0 + .seconds(60)) == true)
    }
}
