import Backoff
import Testing

@testable import MosquittoClient

/// The reconnect decisions, driven by event sequences with time and jitter passed in.
@Suite struct ConnectionStateMachineTests {
    let t0 = ContinuousClock.now
    let policy = ReconnectPolicy(
        initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0, stableAfter: .seconds(30))
    let lost = MQTTError(kind: .connectionLost, message: "lost")
    let refused = MQTTError(kind: .connectionRefused, message: "refused", code: 134)

    @Test func startConnectsOnce() {
        var machine = ConnectionStateMachine(policy: policy)
        #expect(machine.start() == .connect(attempt: 0))
        #expect(machine.start() == .none)
    }

    @Test func failedAttemptsBackOffExponentiallyUpToTheCap() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        var now = t0
        var delays: [Duration] = []
        for attempt in 1...6 {
            guard case .scheduleReconnect(let delay, let error) = machine.connectFailed(refused, now: now, unitRandom: 0.5)
            else {
                Issue.record("expected a scheduled reconnect")
                return
            }
            #expect(error == refused)
            delays.append(delay)
            #expect(machine.reconnectDeadline == now + delay)
            // Too early: nothing happens.
            #expect(machine.reconnectDue(now: now + delay - .milliseconds(1)) == .none)
            now = now + delay
            #expect(machine.reconnectDue(now: now) == .connect(attempt: attempt))
        }
        #expect(delays == [1, 2, 4, 8, 8, 8].map { Duration.seconds($0) })
    }

    @Test func jitterComesFromTheEvent() {
        let jittery = ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0.2)
        var machine = ConnectionStateMachine(policy: jittery)
        _ = machine.start()
        #expect(machine.connectFailed(lost, now: t0, unitRandom: 0) == .scheduleReconnect(after: .milliseconds(800), error: lost))
        _ = machine.reconnectDue(now: t0 + .seconds(1))
        #expect(machine.connectFailed(lost, now: t0, unitRandom: 1) == .scheduleReconnect(after: .milliseconds(2400), error: lost))
    }

    @Test func connackResubscribesOnlyWithoutSession() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        #expect(machine.connackAccepted(sessionPresent: true, now: t0) == .markConnected(sessionPresent: true, resubscribe: false))
        _ = machine.connectionLost(lost, now: t0 + .seconds(60), unitRandom: 0.5)
        _ = machine.reconnectDue(now: t0 + .seconds(61))
        #expect(
            machine.connackAccepted(sessionPresent: false, now: t0 + .seconds(61))
                == .markConnected(sessionPresent: false, resubscribe: true))
    }

    @Test func aStableConnectionResetsTheBackoff() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        _ = machine.connectFailed(lost, now: t0, unitRandom: 0.5)  // 1 s
        _ = machine.reconnectDue(now: t0 + .seconds(1))
        _ = machine.connectFailed(lost, now: t0 + .seconds(1), unitRandom: 0.5)  // 2 s
        _ = machine.reconnectDue(now: t0 + .seconds(3))
        _ = machine.connackAccepted(sessionPresent: true, now: t0 + .seconds(3))
        // Up for 30 s (stableAfter): the next delay is the initial one again.
        #expect(
            machine.connectionLost(lost, now: t0 + .seconds(33), unitRandom: 0.5)
                == .scheduleReconnect(after: .seconds(1), error: lost))
    }

    @Test func aFlappingConnectionKeepsBackingOff() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        var now = t0
        var delays: [Duration] = []
        for _ in 0..<4 {
            _ = machine.connackAccepted(sessionPresent: true, now: now)
            // Kicked off after 2 s, less than stableAfter.
            now = now + .seconds(2)
            if case .scheduleReconnect(let delay, _) = machine.connectionLost(lost, now: now, unitRandom: 0.5) {
                delays.append(delay)
                now = now + delay
            }
            _ = machine.reconnectDue(now: now)
        }
        #expect(delays == [1, 2, 4, 8].map { Duration.seconds($0) })
    }

    @Test func givesUpAfterMaxAttempts() {
        var limited = policy
        limited.maxAttempts = 2
        var machine = ConnectionStateMachine(policy: limited)
        _ = machine.start()
        #expect(machine.connectFailed(refused, now: t0, unitRandom: 0.5) == .scheduleReconnect(after: .seconds(1), error: refused))
        _ = machine.reconnectDue(now: t0 + .seconds(1))
        #expect(machine.connectFailed(refused, now: t0, unitRandom: 0.5) == .scheduleReconnect(after: .seconds(2), error: refused))
        _ = machine.reconnectDue(now: t0 + .seconds(3))
        #expect(machine.connectFailed(refused, now: t0, unitRandom: 0.5) == .giveUp(refused))
        #expect(machine.phase == .stopped)
    }

    @Test func shutdownWhileConnectedDrainsThenStops() {
        var machine = ConnectionStateMachine(policy: policy)
        _ = machine.start()
        _ = machine.connackAccepted(sessionPresent: false, now: t0)
        #expect(machine.shutdownRequested() == .disconnect)
        #expect(machine.shutdownRequested() == .none)
        // The DISCONNECT's own connection close is not a reason to reconnect.
        #expect(machine.connectionLost(lost, now: t0, unitRandom: 0.5) == .stop)
        #expect(machine.disconnected() == .none)
    }

    @Test func shutdownWhileWaitingOrConnectingStopsAtOnce() {
        var waiting = ConnectionStateMachine(policy: policy)
        _ = waiting.start()
        _ = waiting.connectFailed(lost, now: t0, unitRandom: 0.5)
        #expect(waiting.shutdownRequested() == .stop)
        #expect(waiting.reconnectDue(now: t0 + .seconds(100)) == .none)

        var connecting = ConnectionStateMachine(policy: policy)
        _ = connecting.start()
        #expect(connecting.shutdownRequested() == .stop)
        #expect(connecting.connackAccepted(sessionPresent: true, now: t0) == .none)

        var idle = ConnectionStateMachine(policy: policy)
        #expect(idle.shutdownRequested() == .stop)
        #expect(idle.start() == .none)
    }

    @Test func eventsOutOfPhaseAreIgnored() {
        var machine = ConnectionStateMachine(policy: policy)
        #expect(machine.connackAccepted(sessionPresent: true, now: t0) == .none)
        #expect(machine.connectionLost(lost, now: t0, unitRandom: 0.5) == .none)
        _ = machine.start()
        #expect(machine.connectionLost(lost, now: t0, unitRandom: 0.5) == .none)
        _ = machine.connectFailed(lost, now: t0, unitRandom: 0.5)
        // A second report of the same failure (callback and loop return code) changes nothing.
        #expect(machine.connectFailed(lost, now: t0, unitRandom: 0.5) == .none)
        #expect(machine.connectionLost(lost, now: t0, unitRandom: 0.5) == .none)
        #expect(machine.reconnectDeadline == t0 + .seconds(1))
    }
}
