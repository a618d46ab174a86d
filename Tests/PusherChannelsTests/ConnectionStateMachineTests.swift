import Backoff
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

typealias Machine = PusherConnectionStateMachine
typealias Action = PusherConnectionStateMachine.Action

func established(_ socketID: String = "123.456", activity: Int = 120) -> PusherFrame {
    PusherFrame(event: "pusher:connection_established", data: #"{"socket_id":"\#(socketID)","activity_timeout":\#(activity)}"#)
}

func makeMachine(
    policy: ReconnectPolicy = ReconnectPolicy(jitter: 0),
    activity: Duration = .seconds(120),
    pong: Duration = .seconds(30),
    autoReconnect: Bool = true,
    retryAfterRefusal: Bool = true,
    seed: UInt64 = 1
) -> Machine {
    Machine(
        configuration: .init(
            activityTimeout: activity,
            pongTimeout: pong,
            handshakeTimeout: .seconds(10),
            autoReconnect: autoReconnect,
            reconnectPolicy: policy,
            retryAfterRefusal: retryAfterRefusal
        ),
        jitterSeed: seed
    )
}

/// Connects `machine` and delivers connection_established.
@discardableResult
func connect(_ machine: inout Machine, _ clock: ManualClock, socketID: String = "123.456") -> [Action] {
    _ = machine.connectRequested(now: clock.now)
    return machine.receivedFrame(established(socketID), now: clock.now)
}

func reconnectDelays(in actions: [Action]) -> [Duration] {
    actions.compactMap { if case .reconnectScheduled(let d, _) = $0 { d } else { nil } }
}

/// A reconnect "at once" (4200–4299, pong timeout): one delay drawn from 0...500 ms (docs/contract.md
/// §5.5); once it has passed, the transport opens. Returns the delay.
@discardableResult
func reconnectsWithinSpread(
    _ machine: inout Machine, _ clock: inout ManualClock, after actions: [Action],
    sourceLocation: SourceLocation = #_sourceLocation
) -> Duration? {
    let delays = reconnectDelays(in: actions)
    guard delays.count == 1, let delay = delays.first, delay <= .milliseconds(500) else {
        Issue.record("expected one reconnect within 500 ms, got \(delays)", sourceLocation: sourceLocation)
        return nil
    }
    if delay == .zero {
        #expect(actions.contains(.openTransport), sourceLocation: sourceLocation)
        return delay
    }
    #expect(!actions.contains(.openTransport), sourceLocation: sourceLocation)
    clock.advance(delay - .nanoseconds(1))
    #expect(machine.tick(now: clock.now) == [], sourceLocation: sourceLocation)
    clock.advance(.nanoseconds(1))
    #expect(machine.tick(now: clock.now).contains(.openTransport), sourceLocation: sourceLocation)
    return delay
}

func sends(in actions: [Action]) -> [String] {
    actions.compactMap { if case .send(let s) = $0 { s } else { nil } }
}

@Suite struct ConnectionStateMachineTests {
    @Test func handshakeConnectsAndUsesTheSmallerActivityTimeout() {
        var machine = makeMachine(activity: .seconds(120))
        let clock = ManualClock()
        let first = machine.connectRequested(now: clock.now)
        #expect(first == [.connectionStateChanged(.init(previous: .disconnected, current: .connecting)), .openTransport])
        #expect(machine.connectionState == .connecting)
        let second = machine.receivedFrame(established("1.2", activity: 30), now: clock.now)
        #expect(second == [.connectionStateChanged(.init(previous: .connecting, current: .connected, socketID: "1.2"))])
        #expect(machine.socketID == "1.2")
        #expect(machine.activityTimeout == .seconds(30))
        #expect(machine.nextDeadline == clock.now + .seconds(30))
    }

    /// A machine (ours: 120 s) after a `connection_established` whose `activity_timeout` is
    /// the raw JSON text `value`.
    static func handshake(activityTimeout value: String) -> (Machine, [Action]) {
        var machine = makeMachine(activity: .seconds(120))
        let clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        let actions = machine.receivedFrame(
            PusherFrame(
                event: "pusher:connection_established", data: #"{"socket_id":"1.2","activity_timeout":"# + value + "}"),
            now: clock.now)
        return (machine, actions)
    }

    /// Found by `make fuzz` (target pusher-frame): `Int64(seconds * 1000)` trapped on a huge
    /// `activity_timeout`, so one frame from a hostile or broken server crashed the process.
    /// A server's value can only lower ours (docs/pusher-protocol.md §1 "Keep-alive").
    @Test(arguments: ["1e300", "1e16", "9223372036854775807", "1e999", "-5", "0"])
    func absurdServerActivityTimeoutKeepsOurs(_ value: String) {
        let (machine, actions) = Self.handshake(activityTimeout: value)
        #expect(actions == [.connectionStateChanged(.init(previous: .connecting, current: .connected, socketID: "1.2"))])
        #expect(machine.activityTimeout == .seconds(120))
    }

    /// `Infinity` and `NaN` are not JSON (RFC 8259 §6): the handshake is malformed, said so, and
    /// dropped like any other malformed `connection_established`.
    @Test(arguments: ["Infinity", "NaN", "02", "+5"])
    func nonJSONServerActivityTimeoutIsAMalformedHandshake(_ value: String) {
        let (machine, actions) = Self.handshake(activityTimeout: value)
        #expect(actions.contains { if case .error = $0 { true } else { false } })
        #expect(actions.contains(.closeTransport))
        #expect(machine.socketID == nil)
    }

    @Test func fractionalServerActivityTimeoutIsUsedInMilliseconds() {
        var machine = makeMachine(activity: .seconds(120))
        let clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        _ = machine.receivedFrame(
            PusherFrame(event: "pusher:connection_established", data: #"{"socket_id":"1.2","activity_timeout":2.5}"#), now: clock.now)
        #expect(machine.activityTimeout == .milliseconds(2500))
    }

    @Test func malformedHandshakeDropsAndBacksOff() {
        var machine = makeMachine()
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        let actions = machine.receivedFrame(
            PusherFrame(event: "pusher:connection_established", data: #"{"socket_id":"nope"}"#),
            now: clock.now
        )
        #expect(actions.contains(.closeTransport))
        #expect(actions.contains { if case .error(let e) = $0 { e.description.contains("socket_id") } else { false } })
        clock.advance(.milliseconds(10))
        #expect(reconnectDelays(in: machine.transportClosed(code: nil, now: clock.now)) == [.seconds(1)])
    }

    @Test func pingAfterInactivityThenPongTimeoutReconnectsAtOnce() {
        var machine = makeMachine(activity: .seconds(120), pong: .seconds(30))
        var clock = ManualClock()
        connect(&machine, clock)
        clock.advance(.seconds(119))
        #expect(machine.tick(now: clock.now) == [])
        clock.advance(.seconds(1))
        #expect(machine.tick(now: clock.now) == [.send(#"{"event":"pusher:ping","data":{}}"#)])
        #expect(machine.nextDeadline == clock.now + .seconds(30))
        clock.advance(.seconds(29))
        #expect(machine.tick(now: clock.now) == [])
        clock.advance(.seconds(1))
        let drop = machine.tick(now: clock.now)
        #expect(drop == [.connectionStateChanged(.init(previous: .connected, current: .reconnecting)), .closeTransport])
        // The transport ends (whatever code it reports) → reconnect at once, like 4201.
        let after = machine.transportClosed(code: 1000, now: clock.now)
        reconnectsWithinSpread(&machine, &clock, after: after)
        #expect(machine.connectionState == .connecting)
    }

    @Test func anyFrameCountsAsActivityAndPongCancelsTheTimeout() {
        var machine = makeMachine(activity: .seconds(10), pong: .seconds(5))
        var clock = ManualClock()
        connect(&machine, clock)
        clock.advance(.seconds(10))
        #expect(sends(in: machine.tick(now: clock.now)).count == 1)
        clock.advance(.seconds(1))
        #expect(machine.receivedFrame(PusherFrame(event: "pusher:pong", data: "{}"), now: clock.now) == [])
        clock.advance(.seconds(5))
        #expect(machine.tick(now: clock.now) == [])
        #expect(machine.connectionState == .connected)
        // An application event also resets the inactivity timer.
        _ = machine.subscribeRequested("news", now: clock.now)
        clock.advance(.seconds(4))
        _ = machine.receivedFrame(PusherFrame(event: "e", channel: "news", data: "x"), now: clock.now)
        #expect(machine.nextDeadline == clock.now + .seconds(10))
    }

    @Test func answersServerPings() {
        var machine = makeMachine()
        let clock = ManualClock()
        connect(&machine, clock)
        #expect(
            machine.receivedFrame(PusherFrame(event: "pusher:ping", data: "{}"), now: clock.now)
                == [.send(#"{"event":"pusher:pong","data":{}}"#)])
    }

    /// Drives `count` failed attempts and returns the delay scheduled after each.
    func failedAttemptDelays(_ machine: inout Machine, count: Int) -> [Duration] {
        var clock = ManualClock()
        var delays: [Duration] = []
        _ = machine.connectRequested(now: clock.now)
        for _ in 0..<count {
            let actions = machine.transportFailed(message: "refused", now: clock.now)
            guard let delay = reconnectDelays(in: actions).first else { break }
            delays.append(delay)
            clock.advance(delay)
            #expect(machine.tick(now: clock.now).contains(.openTransport))
        }
        return delays
    }

    @Test func backoffSequenceWithoutJitterDoublesUpToTheCap() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(120), multiplier: 2, jitter: 0))
        let delays = failedAttemptDelays(&machine, count: 10)
        #expect(delays == [1, 2, 4, 8, 16, 32, 64, 120, 120, 120].map { Duration.seconds($0) })
    }

    @Test func theCapBoundsEveryDelay() {
        var machine = makeMachine(
            policy: ReconnectPolicy(initialDelay: .milliseconds(500), maxDelay: .seconds(3), multiplier: 3, jitter: 0))
        let delays = failedAttemptDelays(&machine, count: 5)
        #expect(delays == [.milliseconds(500), .milliseconds(1500), .seconds(3), .seconds(3), .seconds(3)])
    }

    @Test func jitterStaysWithinItsBandAndIsReproducible() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(120), multiplier: 2, jitter: 0.2)
        var a = makeMachine(policy: policy, seed: 42)
        var b = makeMachine(policy: policy, seed: 42)
        var c = makeMachine(policy: policy, seed: 7)
        let delaysA = failedAttemptDelays(&a, count: 9)
        let delaysB = failedAttemptDelays(&b, count: 9)
        let delaysC = failedAttemptDelays(&c, count: 9)
        let bases: [Double] = [1, 2, 4, 8, 16, 32, 64, 120, 120]
        #expect(delaysA.count == 9)
        for (delay, base) in zip(delaysA, bases) {
            #expect(delay.seconds >= base * 0.8 - 1e-9 && delay.seconds <= base * 1.2 + 1e-9)
        }
        #expect(delaysA == delaysB)
        #expect(delaysA != delaysC)
        // Not degenerate: the factors actually vary.
        let factors = Set(zip(delaysA, bases).map { ($0.seconds / $1 * 1000).rounded() })
        #expect(factors.count > 3)
    }

    @Test func closeCode4000RangeIsAnErrorAndRetriesOnlyAtTheCap() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(60), jitter: 0))
        let clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        let actions = machine.transportClosed(code: 4001, now: clock.now)
        #expect(actions.contains(.error(.connectionRefused(closeCode: 4001, reason: "application does not exist"))))
        #expect(reconnectDelays(in: actions) == [.seconds(60)])
        #expect(machine.connectionState == .reconnecting)
    }

    @Test func closeCode4000RangeStopsWhenRetryAfterRefusalIsOff() {
        var machine = makeMachine(retryAfterRefusal: false)
        let clock = ManualClock()
        connect(&machine, clock)
        let actions = machine.transportClosed(code: 4009, now: clock.now)
        #expect(actions.contains { if case .error(let e) = $0 { e.isConnectionRefused && e.pusherCode == 4009 } else { false } })
        #expect(reconnectDelays(in: actions).isEmpty)
        #expect(!actions.contains(.openTransport))
        #expect(machine.connectionState == .disconnected)
        #expect(machine.nextDeadline == nil)
    }

    @Test func closeCode4100RangeBacksOffAtLeastOneSecond() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .milliseconds(100), jitter: 0))
        let clock = ManualClock()
        connect(&machine, clock)
        let actions = machine.transportClosed(code: 4100, now: clock.now)
        #expect(reconnectDelays(in: actions) == [.seconds(1)])
        #expect(!actions.contains(.openTransport))
    }

    @Test func closeCode4200RangeReconnectsAtOnceButNotInALoop() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        var clock = ManualClock()
        connect(&machine, clock)
        let first = machine.transportClosed(code: 4200, now: clock.now)
        reconnectsWithinSpread(&machine, &clock, after: first)
        // The new connection is closed with 4201 before it became stable: now back off.
        _ = machine.receivedFrame(established("9.9"), now: clock.now)
        clock.advance(.seconds(1))
        let second = machine.transportClosed(code: 4201, now: clock.now)
        #expect(!second.contains(.openTransport))
        #expect(reconnectDelays(in: second) == [.seconds(2)])
    }

    /// docs/contract.md §5.5: "reconnect at once (a random spread of at most 500 ms, whatever
    /// `initial_delay` is)". Machines with different seeds spread out; a long initial delay
    /// does not stretch the spread.
    @Test func closeCode4200SpreadsReconnectsOverAtMost500Milliseconds() {
        var delays: Set<Duration> = []
        for seed in UInt64(1)...50 {
            var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(10), jitter: 0), seed: seed)
            var clock = ManualClock()
            connect(&machine, clock)
            clock.advance(.seconds(3))
            if let delay = reconnectsWithinSpread(
                &machine, &clock, after: machine.transportClosed(code: 4200 + UInt16(seed), now: clock.now))
            {
                delays.insert(delay)
            }
        }
        #expect(delays.count == 50)
        #expect(delays.contains { $0 < .milliseconds(100) } && delays.contains { $0 > .milliseconds(400) })
    }

    /// Regression (fault matrix row close-4200): twenty 4200 closes, each after the connection
    /// had been up a few seconds but well within `stableAfter`, all reconnect at once; the
    /// attempt count starts over, so a later failure backs off from the first step, not the cap.
    @Test func repeated4200OnWorkingConnectionsReconnectAtOnceEveryTime() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        var clock = ManualClock()
        connect(&machine, clock)
        for i in 0..<20 {
            clock.advance(.seconds(3))
            let actions = machine.transportClosed(code: 4200, now: clock.now)
            reconnectsWithinSpread(&machine, &clock, after: actions)
            _ = machine.receivedFrame(established("9.\(i)"), now: clock.now)
        }
        clock.advance(.seconds(3))
        #expect(reconnectDelays(in: machine.transportClosed(code: 1006, now: clock.now)) == [.seconds(2)])
    }

    @Test func otherCodesAndUncleanClosesBackOff() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        let clock = ManualClock()
        connect(&machine, clock)
        #expect(reconnectDelays(in: machine.transportClosed(code: 1006, now: clock.now)) == [.seconds(1)])
        var other = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        connect(&other, clock)
        #expect(reconnectDelays(in: other.transportClosed(code: nil, now: clock.now)) == [.seconds(1)])
        var rangeFour300 = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        connect(&rangeFour300, clock)
        #expect(reconnectDelays(in: rangeFour300.transportClosed(code: 4301, now: clock.now)) == [.seconds(1)])
    }

    @Test func attemptCounterStartsOverAfterAStableConnection() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0, stableAfter: .seconds(30)))
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        for expected in [1, 2, 4] {
            let delays = reconnectDelays(in: machine.transportFailed(message: "x", now: clock.now))
            #expect(delays == [.seconds(expected)])
            clock.advance(.seconds(expected))
            _ = machine.tick(now: clock.now)
        }
        #expect(machine.failedAttempts == 3)
        // Up for 10 s (not stable): the count continues.
        _ = machine.receivedFrame(established(), now: clock.now)
        clock.advance(.seconds(10))
        #expect(reconnectDelays(in: machine.transportClosed(code: 1006, now: clock.now)) == [.seconds(8)])
        clock.advance(.seconds(8))
        _ = machine.tick(now: clock.now)
        // Up for 30 s (stable): the count starts over.
        _ = machine.receivedFrame(established(), now: clock.now)
        clock.advance(.seconds(30))
        _ = machine.receivedFrame(PusherFrame(event: "pusher:pong"), now: clock.now)
        #expect(reconnectDelays(in: machine.transportClosed(code: 1006, now: clock.now)) == [.seconds(1)])
    }

    @Test func givesUpAfterMaxAttempts() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0, maxAttempts: 2))
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        #expect(reconnectDelays(in: machine.transportFailed(message: "x", now: clock.now)) == [.seconds(1)])
        clock.advance(.seconds(1))
        _ = machine.tick(now: clock.now)
        #expect(reconnectDelays(in: machine.transportFailed(message: "x", now: clock.now)) == [.seconds(2)])
        clock.advance(.seconds(2))
        _ = machine.tick(now: clock.now)
        let last = machine.transportFailed(message: "x", now: clock.now)
        #expect(last.contains(.error(.gaveUp(attempts: 2))))
        #expect(machine.connectionState == .disconnected)
        // connect() starts over.
        #expect(machine.connectRequested(now: clock.now).contains(.openTransport))
        #expect(machine.failedAttempts == 0)
    }

    @Test func autoReconnectOffStaysDisconnected() {
        var machine = makeMachine(autoReconnect: false)
        let clock = ManualClock()
        connect(&machine, clock)
        let actions = machine.transportClosed(code: 4200, now: clock.now)
        #expect(actions == [.connectionStateChanged(.init(previous: .connected, current: .disconnected))])
    }

    @Test func handshakeTimeoutDropsTheConnection() {
        var machine = makeMachine()
        var clock = ManualClock()
        _ = machine.connectRequested(now: clock.now)
        clock.advance(.seconds(9))
        #expect(machine.tick(now: clock.now) == [])
        clock.advance(.seconds(1))
        #expect(machine.tick(now: clock.now).contains(.closeTransport))
        #expect(reconnectDelays(in: machine.transportFailed(message: "closed", now: clock.now)) == [.seconds(1)])
    }

    @Test func disconnectClosesAndDoesNotReconnect() {
        var machine = makeMachine()
        let clock = ManualClock()
        connect(&machine, clock)
        #expect(
            machine.disconnectRequested(now: clock.now)
                == [.connectionStateChanged(.init(previous: .connected, current: .disconnecting)), .closeTransport])
        #expect(
            machine.transportFailed(message: "closed by client", now: clock.now)
                == [.connectionStateChanged(.init(previous: .disconnecting, current: .disconnected))])
        #expect(machine.nextDeadline == nil)
    }

    @Test func connectWhileDisconnectingConnectsOnceClosed() {
        var machine = makeMachine()
        let clock = ManualClock()
        connect(&machine, clock)
        _ = machine.disconnectRequested(now: clock.now)
        #expect(machine.connectRequested(now: clock.now) == [])
        #expect(
            machine.transportClosed(code: 1000, now: clock.now) == [
                .connectionStateChanged(.init(previous: .disconnecting, current: .disconnected)),
                .connectionStateChanged(.init(previous: .disconnected, current: .connecting)),
                .openTransport,
            ])
        // A disconnect after the connect cancels it again.
        connect(&machine, clock)
        _ = machine.disconnectRequested(now: clock.now)
        _ = machine.connectRequested(now: clock.now)
        _ = machine.disconnectRequested(now: clock.now)
        #expect(!machine.transportClosed(code: 1000, now: clock.now).contains(.openTransport))
        #expect(machine.connectionState == .disconnected)
    }

    @Test func publicSubscriptionsRequestedBeforeConnectAreSentAfterIt() {
        var machine = makeMachine()
        let clock = ManualClock()
        #expect(machine.subscribeRequested("news", now: clock.now) == [])
        #expect(machine.subscribeRequested("news", now: clock.now) == [])
        let actions = connect(&machine, clock)
        #expect(sends(in: actions) == [#"{"event":"pusher:subscribe","data":{"channel":"news"}}"#])
        #expect(
            machine.receivedFrame(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "news", data: "{}"), now: clock.now)
                == [.subscriptionSucceeded(channel: "news")])
        #expect(machine.isSubscribed("news"))
        #expect(
            machine.unsubscribeRequested("news", now: clock.now) == [.send(#"{"event":"pusher:unsubscribe","data":{"channel":"news"}}"#)])
        #expect(
            machine.receivedFrame(PusherFrame(event: "e", channel: "news", data: "x"), now: clock.now)
                == [.ignoredFrame(event: "e", reason: "event on a channel we are not subscribed to")])
    }

    @Test func invalidChannelNamesFailAtOnce() {
        var machine = makeMachine()
        let actions = machine.subscribeRequested("bad name!", now: .now)
        #expect(actions.count == 1)
        #expect(actions.allSatisfy { if case .subscriptionFailed("bad name!", _) = $0 { true } else { false } })
        #expect(machine.channelNames.isEmpty)
    }

    @Test func resubscribesWithFreshAuthForTheNewSocketAfterReconnect() {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        var clock = ManualClock()
        _ = machine.subscribeRequested("private-orders", now: clock.now)
        let first = connect(&machine, clock, socketID: "1.1")
        #expect(first.contains(.authorize(channel: "private-orders", socketID: "1.1")))
        let authA = PusherChannelAuth(auth: PusherAuth.channelAuth(key: "k", secret: "s", socketID: "1.1", channel: "private-orders"))
        let sentA = machine.authorizationSucceeded(channel: "private-orders", socketID: "1.1", auth: authA, now: clock.now)
        #expect(sends(in: sentA) == [#"{"event":"pusher:subscribe","data":{"channel":"private-orders","auth":"\#(authA.auth)"}}"#])
        _ = machine.receivedFrame(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "private-orders"), now: clock.now)

        // The connection drops; the server forgot the subscription.
        _ = machine.transportClosed(code: 1006, now: clock.now)
        #expect(!machine.isSubscribed("private-orders"))
        clock.advance(.seconds(1))
        _ = machine.tick(now: clock.now)
        let second = machine.receivedFrame(established("2.2"), now: clock.now)
        #expect(second.contains(.authorize(channel: "private-orders", socketID: "2.2")))
        // A late answer for the old socket is ignored; the new one is sent.
        #expect(machine.authorizationSucceeded(channel: "private-orders", socketID: "1.1", auth: authA, now: clock.now) == [])
        let authB = PusherChannelAuth(auth: PusherAuth.channelAuth(key: "k", secret: "s", socketID: "2.2", channel: "private-orders"))
        #expect(authA != authB)
        let sentB = machine.authorizationSucceeded(channel: "private-orders", socketID: "2.2", auth: authB, now: clock.now)
        #expect(sends(in: sentB) == [#"{"event":"pusher:subscribe","data":{"channel":"private-orders","auth":"\#(authB.auth)"}}"#])
    }

    @Test func selfProvidedAuthIsUsedOnceThenTheAuthorizer() {
        var machine = makeMachine()
        var clock = ManualClock()
        _ = machine.subscribeRequested("private-a", auth: PusherChannelAuth(auth: "k:abc"), now: clock.now)
        let first = connect(&machine, clock, socketID: "1.1")
        #expect(sends(in: first) == [#"{"event":"pusher:subscribe","data":{"channel":"private-a","auth":"k:abc"}}"#])
        reconnectsWithinSpread(&machine, &clock, after: machine.transportClosed(code: 4200, now: clock.now))
        clock.advance(.milliseconds(1))
        #expect(machine.receivedFrame(established("2.2"), now: clock.now).contains(.authorize(channel: "private-a", socketID: "2.2")))
    }

    @Test func failedAuthorizationSurfacesOnTheChannel() {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested("private-a", now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        let actions = machine.authorizationFailed(channel: "private-a", socketID: "1.1", message: "403")
        #expect(actions == [.subscriptionFailed(channel: "private-a", error: .authorizationFailed(channel: "private-a", message: "403"))])
    }

    @Test func presenceMemberListReplacesLocalStateOnEveryResubscription() throws {
        var machine = makeMachine(policy: ReconnectPolicy(initialDelay: .seconds(1), jitter: 0))
        var clock = ManualClock()
        _ = machine.subscribeRequested("presence-ops", now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        let channelData = #"{"user_id":"bridge","user_info":{"role":"bridge"}}"#
        _ = machine.authorizationSucceeded(
            channel: "presence-ops", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x", channelData: channelData), now: clock.now)
        let first = machine.receivedFrame(
            PusherFrame(
                event: "pusher_internal:subscription_succeeded",
                channel: "presence-ops",
                data: #"{"presence":{"ids":["1",2,"bridge"],"hash":{"1":{"name":"Ann"},"2":null,"bridge":{"role":"bridge"}},"count":3}}"#
            ),
            now: clock.now
        )
        #expect(machine.members(of: "presence-ops").map(\.userID) == ["1", "2", "bridge"])
        #expect(machine.members(of: "presence-ops")[0].userInfo == #"{"name":"Ann"}"#)
        #expect(machine.me(of: "presence-ops") == PusherMember(userID: "bridge", userInfo: #"{"role":"bridge"}"#))
        #expect(
            first.contains(
                .presence(
                    .subscriptionSucceeded(
                        channel: "presence-ops", members: machine.members(of: "presence-ops"), me: machine.me(of: "presence-ops")))))
        // member_added for a known id does not duplicate; a numeric id is normalised.
        #expect(
            machine.receivedFrame(
                PusherFrame(event: "pusher_internal:member_added", channel: "presence-ops", data: #"{"user_id":2,"user_info":{"n":1}}"#),
                now: clock.now) == [])
        #expect(machine.members(of: "presence-ops").count == 3)
        let added = machine.receivedFrame(
            PusherFrame(event: "pusher_internal:member_added", channel: "presence-ops", data: #"{"user_id":3}"#), now: clock.now)
        #expect(added == [.presence(.memberAdded(channel: "presence-ops", member: PusherMember(userID: "3")))])

        // Reconnect: the new list is the truth (1 left while we were away, 4 joined).
        _ = machine.transportClosed(code: 1006, now: clock.now)
        #expect(machine.members(of: "presence-ops").isEmpty)
        clock.advance(.seconds(1))
        _ = machine.tick(now: clock.now)
        _ = machine.receivedFrame(established("2.2"), now: clock.now)
        _ = machine.authorizationSucceeded(
            channel: "presence-ops", socketID: "2.2", auth: PusherChannelAuth(auth: "k:y", channelData: channelData), now: clock.now)
        _ = machine.receivedFrame(
            PusherFrame(
                event: "pusher_internal:subscription_succeeded",
                channel: "presence-ops",
                data: #"{"presence":{"ids":["2","3","4","bridge"],"hash":{"2":{},"3":{},"4":{},"bridge":{}},"count":4}}"#
            ),
            now: clock.now
        )
        #expect(machine.members(of: "presence-ops").map(\.userID) == ["2", "3", "4", "bridge"])
        let removed = machine.receivedFrame(
            PusherFrame(event: "pusher_internal:member_removed", channel: "presence-ops", data: #"{"user_id":"4"}"#), now: clock.now)
        #expect(removed == [.presence(.memberRemoved(channel: "presence-ops", member: PusherMember(userID: "4", userInfo: "{}")))])
        #expect(machine.members(of: "presence-ops").map(\.userID) == ["2", "3", "bridge"])
    }

    @Test func presenceAuthWithoutChannelDataFails() {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested("presence-x", now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        let actions = machine.authorizationSucceeded(
            channel: "presence-x", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"), now: clock.now)
        #expect(actions.count == 1)
        #expect(actions.allSatisfy { if case .subscriptionFailed("presence-x", let e) = $0 { e.isSubscriptionFailure } else { false } })
    }

    @Test func subscriptionErrorsSurfacePerChannel() {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested("private-a", auth: PusherChannelAuth(auth: "k:bad"), now: clock.now)
        _ = machine.subscribeRequested("news", now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        // pusher:error with code 4009 in string form, no channel field: attributed to the one
        // channel waiting for a reply that needs auth... both are subscribing, so the message decides.
        let error = machine.receivedFrame(
            PusherFrame(event: "pusher:error", data: #"{"message":"Invalid signature for private-a","code":4009}"#),
            now: clock.now
        )
        #expect(
            error == [
                .subscriptionFailed(
                    channel: "private-a",
                    error: .subscriptionFailed(channel: "private-a", message: "Invalid signature for private-a", code: 4009))
            ])
        let subError = machine.receivedFrame(
            PusherFrame(event: "pusher:subscription_error", channel: "news", data: #"{"type":"AuthError","error":"nope","status":401}"#),
            now: clock.now
        )
        #expect(subError == [.subscriptionFailed(channel: "news", error: .subscriptionFailed(channel: "news", message: "nope", code: 401))])
        // An unattributable error (object form, null code) is a client-wide error.
        let general = machine.receivedFrame(
            PusherFrame(event: "pusher:error", data: #"{"message":"Over quota","code":null}"#), now: clock.now)
        #expect(general == [.error(.serverError(message: "Over quota", code: nil))])
    }

    @Test func clientEventsAreCheckedAndRateLimited() throws {
        var machine = makeMachine()
        var clock = ManualClock()
        _ = machine.subscribeRequested("private-chat", auth: PusherChannelAuth(auth: "k:x"), now: clock.now)
        _ = machine.subscribeRequested("news", now: clock.now)
        connect(&machine, clock)
        // Not yet subscribed.
        #expect(throws: PusherError.self) {
            try machine.clientEventRequested(channel: "private-chat", event: "client-x", data: "{}", now: clock.now)
        }
        _ = machine.receivedFrame(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "private-chat"), now: clock.now)
        _ = machine.receivedFrame(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "news"), now: clock.now)
        #expect(throws: PusherError.self) {
            try machine.clientEventRequested(channel: "news", event: "client-x", data: "{}", now: clock.now)
        }
        #expect(throws: PusherError.self) {
            try machine.clientEventRequested(channel: "private-chat", event: "typing", data: "{}", now: clock.now)
        }
        for _ in 0..<10 {
            let action = try machine.clientEventRequested(
                channel: "private-chat", event: "client-typing", data: #"{"a":1}"#, now: clock.now)
            #expect(action == .send(#"{"event":"client-typing","channel":"private-chat","data":"{\"a\":1}"}"#))
            clock.advance(.milliseconds(50))
        }
        do {
            _ = try machine.clientEventRequested(channel: "private-chat", event: "client-typing", data: "{}", now: clock.now)
            Issue.record("the 11th client event within a second must be refused")
        } catch {
            #expect(error.isClientEventRejected)
            #expect(error.pusherCode == 4301)
        }
        clock.advance(.milliseconds(600))
        _ = try machine.clientEventRequested(channel: "private-chat", event: "client-typing", data: "{}", now: clock.now)
    }

    @Test func eventsOnPresenceChannelsCarryTheUserID() throws {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested(
            "presence-x", auth: PusherChannelAuth(auth: "k:x", channelData: #"{"user_id":"me"}"#), now: clock.now)
        connect(&machine, clock)
        let actions = machine.receivedFrame(
            try PusherFrame.parse(#"{"event":"client-hi","channel":"presence-x","data":"{}","user_id":42}"#), now: clock.now)
        #expect(actions == [.deliver(PusherEvent(name: "client-hi", channel: "presence-x", data: "{}", userID: "42"))])
    }

    @Test func cacheMissIsDeliveredAsAnEvent() {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested("cache-prices", now: clock.now)
        connect(&machine, clock)
        #expect(
            machine.receivedFrame(PusherFrame(event: "pusher:cache_miss", channel: "cache-prices"), now: clock.now)
                == [.deliver(PusherEvent(name: "pusher:cache_miss", channel: "cache-prices", data: nil))])
    }
}
