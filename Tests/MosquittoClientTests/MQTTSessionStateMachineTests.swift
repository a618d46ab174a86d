import Backoff
import DequeModule
import MQTTVocabulary
import Testing

@testable import MosquittoClient

/// The session decisions — start, what to send after a CONNACK, reconnect or give up, stop —
/// driven by event sequences with a manual clock; publishes are numbers, waiters names.
@Suite struct MQTTSessionStateMachineTests {
    typealias Machine = MQTTSessionStateMachine<Int, String>
    typealias Request = PendingRequest<String>

    let t0 = ContinuousClock.now
    let policy = ReconnectPolicy(
        initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0, stableAfter: .seconds(30))
    let drain = Duration.seconds(5)
    let lost = MQTTError(kind: .connectionLost, message: "lost")
    let refused = MQTTError(kind: .connectionRefused, message: "refused", code: 134)

    func sub(_ filter: String) -> MQTTSubscription { MQTTSubscription(filter, qos: .atLeastOnce) }

    /// A machine whose network thread runs and whose first attempt is under way.
    func connecting() -> Machine {
        var machine = Machine(policy: policy, drainTimeout: drain)
        _ = machine.startRequested()
        _ = machine.networkThreadStarted(now: t0)
        _ = machine.takeConnectionStateChange()
        return machine
    }

    /// A machine connected at `t0` with a session.
    func connected() -> Machine {
        var machine = connecting()
        _ = machine.connectSucceeded(sessionPresent: true, now: t0)
        _ = machine.takeConnectionStateChange()
        return machine
    }

    /// The CONNACK's resend plan, or `nil` (recorded as an issue) when the action is another one.
    func resend(_ action: Machine.NetworkAction) -> Machine.Resend? {
        guard case .sendAfterConnect(let resend) = action else {
            Issue.record("expected sendAfterConnect, got \(action)")
            return nil
        }
        return resend
    }

    @Test func startsOnceAndTheNetworkThreadConnects() {
        var machine = Machine(policy: policy, drainTimeout: drain)
        #expect(machine.connectionState == .idle)
        #expect(machine.startRequested() == .startNetworkThread)
        #expect(machine.startRequested() == .none)
        #expect(machine.takeConnectionStateChange() == nil)
        #expect(machine.networkThreadStarted(now: t0) == .connect(attempt: 0))
        #expect(machine.takeConnectionStateChange() == .connecting(attempt: 0))
        #expect(machine.takeConnectionStateChange() == nil)
        #expect(!machine.isConnected)
        #expect(
            machine.connectSucceeded(sessionPresent: false, now: t0)
                == .sendAfterConnect(
                    .init(sessionPresent: false, resubscriptions: [], requests: [], publishes: [])))
        #expect(machine.isConnected)
        #expect(machine.takeConnectionStateChange() == .connected(sessionPresent: false))
    }

    @Test func whileDisconnectedQoS0IsRefusedAndQoS1WaitsForTheConnackInOrder() {
        var machine = connecting()
        #expect(machine.publishRequested(1, qos: .atMostOnce) == .reject(.notConnected))
        #expect(machine.publishRequested(2, qos: .atLeastOnce) == .queued)
        #expect(machine.publishRequested(3, qos: .exactlyOnce) == .queued)
        #expect(machine.queuedPublishCount == 2)
        let plan = resend(machine.connectSucceeded(sessionPresent: true, now: t0))
        #expect(plan.map { Array($0.publishes) } == [2, 3])
        #expect(machine.queuedPublishCount == 0)
        #expect(machine.publishRequested(4, qos: .atMostOnce) == .handOver)
        #expect(machine.publishRequested(5, qos: .atLeastOnce) == .handOver)
    }

    @Test func requestsAreSentWhenConnectedAndQueuedOtherwise() {
        var machine = connecting()
        #expect(machine.subscribeRequested(sub("a/#"), waiter: "early") == .queued)
        let plan = resend(machine.connectSucceeded(sessionPresent: false, now: t0))
        // The queued SUBSCRIBE covers its own filter: no second one from the resubscribe.
        #expect(plan?.resubscriptions == [])
        #expect(plan.map { Array($0.requests) } == [Request(request: .subscribe(sub("a/#")), waiter: "early")])
        #expect(machine.subscribeRequested(sub("b/#"), waiter: "now") == .send)
        #expect(machine.unsubscribeRequested("a/#", waiter: "gone") == .send)
        #expect(machine.subscriptions == [sub("b/#")])
    }

    /// flushAfterConnect's rule: without a session every known subscription is sent again,
    /// except filters a queued SUBSCRIBE sends anyway; with a session none is.
    @Test func withoutASessionKnownSubscriptionsAreRestoredExceptThoseAQueuedSubscribeCovers() {
        var machine = connected()
        for filter in ["a", "b", "c"] { #expect(machine.subscribeRequested(sub(filter), waiter: filter) == .send) }
        // "b" was sent but not acknowledged when the connection dropped.
        let unacknowledged = [Request(request: .subscribe(sub("b")), waiter: "b")]
        _ = machine.connectionLost(lost, unacknowledged: unacknowledged, now: t0 + .seconds(1), unitRandom: 0.5)
        #expect(machine.subscribeRequested(sub("c"), waiter: "c again") == .queued)
        #expect(machine.unsubscribeRequested("a", waiter: "drop a") == .queued)
        #expect(machine.subscribeRequested(sub("d"), waiter: "d") == .queued)
        _ = machine.backoffElapsed(now: t0 + .seconds(2))
        let plan = resend(machine.connectSucceeded(sessionPresent: false, now: t0 + .seconds(2)))
        // "a" was unsubscribed, "b", "c", "d" have queued SUBSCRIBEs: nothing left to restore.
        #expect(plan?.resubscriptions == [])
        #expect(
            plan.map { Array($0.requests) } == [
                Request(request: .subscribe(sub("b")), waiter: "b"),
                Request(request: .subscribe(sub("c")), waiter: "c again"),
                Request(request: .unsubscribe("a"), waiter: "drop a"),
                Request(request: .subscribe(sub("d")), waiter: "d"),
            ])
        #expect(machine.subscriptions == [sub("b"), sub("c"), sub("d")])

        // Lost again with everything acknowledged: no session restores all three, a session none.
        _ = machine.connectionLost(lost, unacknowledged: [], now: t0 + .seconds(3), unitRandom: 0.5)
        _ = machine.backoffElapsed(now: t0 + .seconds(10))
        #expect(
            resend(machine.connectSucceeded(sessionPresent: false, now: t0 + .seconds(10)))?.resubscriptions
                == [sub("b"), sub("c"), sub("d")])
        _ = machine.connectionLost(lost, unacknowledged: [], now: t0 + .seconds(11), unitRandom: 0.5)
        _ = machine.backoffElapsed(now: t0 + .seconds(30))
        let withSession = resend(machine.connectSucceeded(sessionPresent: true, now: t0 + .seconds(30)))
        #expect(withSession?.resubscriptions == [])
        #expect(withSession?.requests.isEmpty == true)
    }

    @Test func aLostConnectionWaitsForTheBackoffWithAManualClock() {
        var machine = connected()
        let action = machine.connectionLost(lost, unacknowledged: [], now: t0 + .seconds(5), unitRandom: 0.5)
        #expect(action == .scheduleReconnect(until: t0 + .seconds(6), delay: .seconds(1), error: lost))
        #expect(machine.takeConnectionStateChange() == .disconnected(error: lost, retryIn: .seconds(1)))
        #expect(machine.reconnectDeadline == t0 + .seconds(6))
        #expect(!machine.isConnected)
        // Woken early (a stale wake-up): wait again for the same deadline.
        #expect(machine.backoffElapsed(now: t0 + .seconds(5.5)) == .keepWaiting(until: t0 + .seconds(6)))
        #expect(machine.takeConnectionStateChange() == nil)
        #expect(machine.backoffElapsed(now: t0 + .seconds(6)) == .connect(attempt: 1))
        #expect(machine.takeConnectionStateChange() == .connecting(attempt: 1))
        #expect(machine.reconnectDeadline == nil)
    }

    /// lostOrFailed's rule: a socket that closes before the CONNACK is a failed attempt, so a
    /// flapping broker keeps backing off.
    @Test func aConnectionLostBeforeTheConnackIsAFailedAttempt() {
        var machine = connecting()
        var now = t0
        var delays: [Duration] = []
        for attempt in 1...4 {
            guard
                case .scheduleReconnect(let until, let delay, _) =
                    machine.connectionLost(lost, unacknowledged: [], now: now, unitRandom: 0.5)
            else {
                Issue.record("expected a scheduled reconnect")
                return
            }
            delays.append(delay)
            now = until
            #expect(machine.backoffElapsed(now: now) == .connect(attempt: attempt))
        }
        #expect(delays == [1, 2, 4, 8].map { Duration.seconds($0) })
        // A second report of the same failure (callback and loop return code) changes nothing.
        _ = machine.connectFailed(refused, now: now, unitRandom: 0.5)
        #expect(machine.connectionLost(lost, unacknowledged: [], now: now, unitRandom: 0.5) == .none)
        #expect(machine.reconnectDeadline == now + .seconds(8))
    }

    @Test func aStableConnectionResetsTheBackoff() {
        var machine = connecting()
        _ = machine.connectFailed(refused, now: t0, unitRandom: 0.5)  // 1 s
        _ = machine.backoffElapsed(now: t0 + .seconds(1))
        _ = machine.connectFailed(refused, now: t0 + .seconds(1), unitRandom: 0.5)  // 2 s
        _ = machine.backoffElapsed(now: t0 + .seconds(3))
        _ = machine.connectSucceeded(sessionPresent: true, now: t0 + .seconds(3))
        #expect(
            machine.connectionLost(lost, unacknowledged: [], now: t0 + .seconds(33), unitRandom: 0.5)
                == .scheduleReconnect(until: t0 + .seconds(34), delay: .seconds(1), error: lost))
    }

    @Test func givingUpReleasesWhatWaitedWithTheError() {
        var limited = policy
        limited.maxAttempts = 1
        var machine = Machine(policy: limited, drainTimeout: drain)
        _ = machine.startRequested()
        _ = machine.networkThreadStarted(now: t0)
        #expect(machine.publishRequested(7, qos: .atLeastOnce) == .queued)
        #expect(machine.subscribeRequested(sub("x"), waiter: "x") == .queued)
        _ = machine.connectFailed(refused, now: t0, unitRandom: 0.5)
        _ = machine.backoffElapsed(now: t0 + .seconds(1))
        let action = machine.connectFailed(refused, now: t0 + .seconds(1), unitRandom: 0.5)
        #expect(
            action == .release(.init(error: refused, publishes: [7], requests: [Request(request: .subscribe(sub("x")), waiter: "x")])))
        #expect(machine.isReleased)
        #expect(!machine.isStopped)
        #expect(machine.publishRequested(8, qos: .atLeastOnce) == .reject(.shutdown))
        _ = machine.takeConnectionStateChange()
        machine.handleDestroyed()
        #expect(machine.isStopped)
        #expect(machine.takeConnectionStateChange() == .stopped(error: refused))
    }

    @Test func stopBeforeStartReleasesOnTheCallersThread() {
        var machine = Machine(policy: policy, drainTimeout: drain)
        #expect(machine.stopRequested() == .release(.init(error: nil, publishes: [], requests: [])))
        #expect(machine.stopRequested() == .none)
        #expect(machine.startRequested() == .none)
        #expect(machine.subscribeRequested(sub("a"), waiter: "a") == .reject(.shutdown))
        machine.handleDestroyed()
        #expect(machine.isStopped)
        #expect(machine.connectionState == .stopped(error: nil))
    }

    @Test func stopBeforeTheNetworkThreadRanReleasesWhenItStarts() {
        var machine = Machine(policy: policy, drainTimeout: drain)
        _ = machine.startRequested()
        #expect(machine.stopRequested() == .wakeNetworkThread)
        #expect(machine.networkThreadStarted(now: t0) == .release(.init(error: nil, publishes: [], requests: [])))
    }

    /// No network thread could be created: the caller releases what waited with the error, also
    /// when a stop was asked before (no thread will carry it out); the client ends stopped with it.
    @Test func aNetworkThreadThatCannotStartReleasesWithTheError() {
        let noThread = MQTTError(kind: .library, message: "no thread")
        var machine = Machine(policy: policy, drainTimeout: drain)
        #expect(machine.networkThreadNotStarted(noThread) == nil)
        _ = machine.startRequested()
        #expect(machine.publishRequested(7, qos: .atLeastOnce) == .queued)
        #expect(machine.stopRequested() == .wakeNetworkThread)
        #expect(machine.networkThreadNotStarted(noThread) == .init(error: noThread, publishes: [7], requests: []))
        #expect(machine.networkThreadNotStarted(noThread) == nil)
        #expect(machine.isReleased)
        machine.handleDestroyed()
        #expect(machine.connectionState == .stopped(error: noThread))
    }

    @Test func stopWhileConnectedDrainsUntilTheDeadlineThenReleases() {
        var machine = connected()
        #expect(machine.stopRequested() == .wakeNetworkThread)
        #expect(machine.stopRequested() == .none)
        #expect(machine.isStopping)
        #expect(!machine.isReleased)
        #expect(machine.publishRequested(1, qos: .atLeastOnce) == .reject(.shutdown))
        #expect(machine.unsubscribeRequested("a", waiter: "a") == .reject(.shutdown))
        // The state stays connected while draining.
        #expect(machine.connectionState == .connected(sessionPresent: true))
        #expect(machine.loopPassCompleted(now: t0 + .seconds(2)) == .drainAndDisconnect(until: t0 + .seconds(2) + drain))
        #expect(machine.loopPassCompleted(now: t0 + .seconds(3)) == .none)
        #expect(machine.stopRequested() == .none)
        #expect(machine.publishRequested(1, qos: .atLeastOnce) == .reject(.shutdown))
        #expect(machine.disconnectCompleted(now: t0 + .seconds(4)) == .release(.init(error: nil, publishes: [], requests: [])))
        #expect(machine.disconnectCompleted(now: t0 + .seconds(4)) == .none)
    }

    @Test func aConnectionLostBeforeTheDrainBeganReleasesAtOnceWithoutReconnecting() {
        var machine = connected()
        _ = machine.stopRequested()
        let unacknowledged = [Request(request: .subscribe(sub("s")), waiter: "s")]
        #expect(
            machine.connectionLost(lost, unacknowledged: unacknowledged, now: t0 + .seconds(60), unitRandom: 0.5)
                == .release(.init(error: nil, publishes: [], requests: Deque(unacknowledged))))
        #expect(machine.loopPassCompleted(now: t0 + .seconds(60)) == .none)
    }

    @Test func stopWhileWaitingWakesTheThreadWhichReleasesWhatWaited() {
        var machine = connecting()
        _ = machine.connectFailed(refused, now: t0, unitRandom: 0.5)
        #expect(machine.publishRequested(9, qos: .atLeastOnce) == .queued)
        #expect(machine.stopRequested() == .wakeNetworkThread)
        #expect(machine.reconnectDeadline == nil)
        #expect(machine.backoffElapsed(now: t0 + .milliseconds(10)) == .release(.init(error: nil, publishes: [9], requests: [])))
        #expect(machine.backoffElapsed(now: t0 + .seconds(10)) == .none)
    }

    @Test func stopWhileConnectingIgnoresTheConnackAndReleasesAfterTheLoopPass() {
        var machine = connecting()
        _ = machine.stopRequested()
        #expect(machine.connectSucceeded(sessionPresent: true, now: t0) == .none)
        #expect(machine.connectFailed(refused, now: t0, unitRandom: 0.5) == .none)
        #expect(machine.connectionState == .connecting(attempt: 0))
        #expect(machine.takeConnectionStateChange() == nil)
        #expect(machine.loopPassCompleted(now: t0) == .release(.init(error: nil, publishes: [], requests: [])))
        machine.handleDestroyed()
        #expect(machine.takeConnectionStateChange() == .stopped(error: nil))
    }
}
