import Backoff
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// ``ConnectedState`` (keep-alive), ``ReconnectSchedule`` and ``ConnectionLifecycle`` on their
/// own, with a manual clock.
@Suite struct ConnectionLifecycleTests {
    static func lifecycle(policy: ReconnectPolicy = ReconnectPolicy(jitter: 0), autoReconnect: Bool = true) -> ConnectionLifecycle {
        ConnectionLifecycle(
            configuration: .init(
                activityTimeout: .seconds(120), pongTimeout: .seconds(30), handshakeTimeout: .seconds(10),
                autoReconnect: autoReconnect, reconnectPolicy: policy),
            jitterSeed: 1)
    }

    static let established = ProtocolEventData.ConnectionEstablished(socketID: "1.1", activityTimeoutSeconds: 40)

    @Test func keepAlivePingsAfterSilenceThenGivesUpWithoutAFrame() {
        var clock = ManualClock()
        var connected = ConnectedState(socketID: "1.1", activityTimeout: .seconds(40), now: clock.now)
        clock.advance(.seconds(39))
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .nothingDue)
        clock.advance(.seconds(1))
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .sendPing)
        #expect(connected.pingSentAt == clock.now)
        // The ping is sent once, not on every tick.
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .nothingDue)
        clock.advance(.seconds(30))
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .pongMissing)
    }

    @Test func aFrameAnswersThePing() {
        var clock = ManualClock()
        var connected = ConnectedState(socketID: "1.1", activityTimeout: .seconds(40), now: clock.now)
        clock.advance(.seconds(40))
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .sendPing)
        clock.advance(.seconds(29))
        connected.receivedActivity(now: clock.now)
        #expect(connected.pingSentAt == nil)
        #expect(connected.deadline(pongTimeout: .seconds(30)) == clock.now + .seconds(40))
        clock.advance(.seconds(1))
        #expect(connected.timeElapsed(now: clock.now, pongTimeout: .seconds(30)) == .nothingDue)
    }

    @Test(
        arguments: [(nil, 120_000), (30.0, 30_000), (0.25, 250), (500.0, 120_000), (-1.0, 120_000), (1e300, 120_000)] as [(Double?, Int64)]
    )
    func theServersActivityTimeoutCanOnlyLowerOurs(_ server: Double?, _ expectedMilliseconds: Int64) {
        #expect(ConnectedState.activityTimeout(ours: .seconds(120), serverSeconds: server) == .milliseconds(expectedMilliseconds))
    }

    @Test func reconnectScheduleByCloseCodeClass() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(10), jitter: 0)
        var schedule = ReconnectSchedule(policy: policy, autoReconnect: true, retryAfterRefusal: true, jitterSeed: 1)
        let clock = ManualClock()
        #expect(
            schedule.connectionLost(.backoffUnknown, connectedAt: nil, now: clock.now)
                == .reconnect(after: .milliseconds(100), attempt: 1))
        #expect(
            schedule.connectionLost(.backoffUnknown, connectedAt: nil, now: clock.now)
                == .reconnect(after: .milliseconds(200), attempt: 2))
        // 4100–4199: at least one second.
        #expect(schedule.connectionLost(.backoff, connectedAt: nil, now: clock.now) == .reconnect(after: .seconds(1), attempt: 3))
        // 4000–4099: only at the cap.
        #expect(
            schedule.connectionLost(.doNotRetryUnchanged, connectedAt: nil, now: clock.now)
                == .reconnect(after: .seconds(10), attempt: 4))
        #expect(schedule.attempt == 4)
        schedule.connectRequestedWhileDisconnected()
        #expect(schedule.attempt == 0)
    }

    @Test func reconnectAtOnceIsSpreadAndStartsTheCountOverOnlyAfterUptime() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), jitter: 0)
        var schedule = ReconnectSchedule(policy: policy, autoReconnect: true, retryAfterRefusal: true, jitterSeed: 7)
        var clock = ManualClock()
        guard case .reconnect(let first, 1) = schedule.connectionLost(.reconnectImmediately, connectedAt: nil, now: clock.now) else {
            Issue.record("expected a first reconnect")
            return
        }
        #expect(first <= ReconnectSchedule.immediateReconnectSpread)
        // The next one failed at once: backoff, not another immediate reconnect.
        #expect(
            schedule.connectionLost(.reconnectImmediately, connectedAt: nil, now: clock.now)
                == .reconnect(after: .seconds(2), attempt: 2))
        // A connection that stayed up 2 s and was then closed with 4200: at once again.
        let connectedAt = clock.now
        clock.advance(ReconnectSchedule.immediateReconnectAfterUptime)
        guard
            case .reconnect(let again, 1) = schedule.connectionLost(.reconnectImmediately, connectedAt: connectedAt, now: clock.now)
        else {
            Issue.record("expected the count to start over")
            return
        }
        #expect(again <= ReconnectSchedule.immediateReconnectSpread)
    }

    @Test func reconnectScheduleStopsOrGivesUp() {
        let clock = ManualClock()
        var off = ReconnectSchedule(policy: ReconnectPolicy(jitter: 0), autoReconnect: false, retryAfterRefusal: true, jitterSeed: 1)
        #expect(off.connectionLost(.backoffUnknown, connectedAt: nil, now: clock.now) == .stayDisconnected)
        var refusedStops = ReconnectSchedule(
            policy: ReconnectPolicy(jitter: 0), autoReconnect: true, retryAfterRefusal: false, jitterSeed: 1)
        #expect(refusedStops.connectionLost(.doNotRetryUnchanged, connectedAt: nil, now: clock.now) == .stayDisconnected)
        var limited = ReconnectSchedule(
            policy: ReconnectPolicy(jitter: 0, maxAttempts: 1), autoReconnect: true, retryAfterRefusal: true, jitterSeed: 1)
        #expect(limited.connectionLost(.backoffUnknown, connectedAt: nil, now: clock.now) != .giveUp(attempts: 1))
        #expect(limited.connectionLost(.backoffUnknown, connectedAt: nil, now: clock.now) == .giveUp(attempts: 1))
    }

    @Test func lifecycleReportsWhenTheConnectionEnded() {
        var lifecycle = Self.lifecycle(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        var clock = ManualClock()
        _ = lifecycle.connectRequested(now: clock.now)
        #expect(lifecycle.phase == .connecting(ConnectingState(since: clock.now)))
        let connected = lifecycle.connectionEstablished(Self.established, now: clock.now)
        #expect(connected == [.connectionStateChanged(.init(previous: .connecting, current: .connected, socketID: "1.1"))])
        #expect(lifecycle.socketID == "1.1")
        #expect(lifecycle.effectiveActivityTimeout == .seconds(40))
        clock.advance(.seconds(5))
        let lost = lifecycle.transportClosed(code: 4100, now: clock.now)
        #expect(lost.connectionEnded)
        #expect(lost.actions.contains(.reconnectScheduled(after: .seconds(1), attempt: 1)))
        #expect(lifecycle.phase == .waiting(WaitingState(until: clock.now + .seconds(1))))
        // A close while already waiting changes nothing.
        #expect(lifecycle.transportClosed(code: 1006, now: clock.now) == .init(actions: [], connectionEnded: false))
    }

    @Test func aHandshakeWithoutSocketIDIsAProtocolErrorThatBacksOff() {
        var lifecycle = Self.lifecycle()
        let clock = ManualClock()
        _ = lifecycle.connectRequested(now: clock.now)
        let actions = lifecycle.connectionEstablished(nil, now: clock.now)
        #expect(actions.first == .error(.malformedFrame("connection_established without a valid socket_id")))
        #expect(actions.last == .closeTransport)
        #expect(lifecycle.phase == .dropping(DroppingState(reason: .protocolError, connectedAt: nil)))
        #expect(DroppingState(reason: .protocolError, connectedAt: nil).closeCodeAction == .backoffUnknown)
        #expect(DroppingState(reason: .pongTimeout, connectedAt: nil).closeCodeAction == .reconnectImmediately)
    }

    @Test func disconnectWhileClosingThenConnectReconnectsOnceClosed() {
        var lifecycle = Self.lifecycle()
        let clock = ManualClock()
        _ = lifecycle.connectRequested(now: clock.now)
        _ = lifecycle.connectionEstablished(Self.established, now: clock.now)
        let disconnect = lifecycle.disconnectRequested(now: clock.now)
        #expect(disconnect.connectionEnded)
        #expect(disconnect.actions.last == .closeTransport)
        #expect(lifecycle.connectRequested(now: clock.now) == [])
        let closed = lifecycle.transportClosed(code: 1000, now: clock.now)
        #expect(!closed.connectionEnded)
        #expect(closed.actions.last == .openTransport)
        #expect(lifecycle.connectionState == .connecting)
    }
}
