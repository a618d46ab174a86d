import Backoff
import DequeModule
import MQTTVocabulary

/// The life of one MQTT client session: started, connected, reconnecting, stopping, stopped —
/// and what the session remembers across connections (subscriptions, requests and publishes
/// that wait for the next CONNACK).
///
/// Pure: no I/O, no logging, no clock reads, no randomness. `now` and the
/// jitter's `unitRandom` come in with the events. `MosquittoConnection` keeps one instance under
/// its `session` lock, feeds it what happened and `switch`es over the returned action.
/// Reconnect timing is the `ConnectionStateMachine` it carries in its states.
///
/// `Publish` is what the owner queues while disconnected and `Waiter` what waits for a
/// SUBACK/UNSUBACK; both are opaque here (tests use plain values).
///
/// Who calls what: `startRequested`, `stopRequested`, `publishRequested`, `subscribeRequested`
/// and `unsubscribeRequested` come from any thread; every other event comes from the network
/// thread, which alone uses the libmosquitto handle while connecting, draining and releasing.
struct MQTTSessionStateMachine<Publish, Waiter> {
    /// Where the client is.
    enum State {
        /// `start()` not called yet; no network thread.
        case idle
        /// The network thread runs the connection; its phase is in the connection machine.
        case running(ConnectionStateMachine)
        /// `stop` was asked while running. The network thread carries out `next` (drain and
        /// DISCONNECT, or release) when it next looks: after a loop pass or when woken from a wait.
        case stopRequested(ConnectionStateMachine, next: ConnectionStateMachine.Action)
        /// Everything that waited has been handed to the owner to fail; the handle is being destroyed.
        case releasing(error: MQTTError?)
        /// The handle is destroyed and the streams ended; `error` is set when the client gave up.
        case stopped(error: MQTTError?)
    }

    /// Where the client is.
    private(set) var state: State = .idle
    /// Subscriptions to restore when the broker has no session, in the order they were made.
    private(set) var subscriptions: [MQTTSubscription] = []
    private let policy: ReconnectPolicy
    private let brokers: Int
    private let drainTimeout: Duration
    private var queuedRequests: Deque<PendingRequest<Waiter>> = []
    private var queuedPublishes: Deque<Publish> = []
    /// The value `MQTTClient.state` shows.
    private(set) var connectionState: MQTTConnectionState = .idle
    private var connectionStateChanged = false

    /// A machine for a client that reconnects by `policy`, in turn to `brokers` addresses, and
    /// drains at most `drainTimeout` on shutdown.
    init(policy: ReconnectPolicy, brokers: Int = 1, drainTimeout: Duration) {
        self.policy = policy
        self.brokers = brokers
        self.drainTimeout = drainTimeout
    }

    /// The index of the broker address the current or next attempt uses (`MQTTConfiguration.brokers`).
    var broker: Int {
        guard case .running(let connection) = state else { return 0 }
        return connection.broker
    }

    /// Whether publishes and requests go straight to libmosquitto.
    var isConnected: Bool {
        guard case .running(let connection) = state, case .connected = connection.phase else { return false }
        return true
    }

    /// Whether the client refuses new work (stop asked, draining, releasing, or stopped).
    var isStopping: Bool {
        switch state {
        case .idle: return false
        case .running(let connection):
            switch connection.phase {
            case .draining, .stopped: return true
            case .idle, .connecting, .connected, .waiting: return false
            }
        case .stopRequested, .releasing, .stopped: return true
        }
    }

    /// Whether the owner has been told to release everything (nothing may wait any more).
    var isReleased: Bool {
        switch state {
        case .idle, .running, .stopRequested: return false
        case .releasing, .stopped: return true
        }
    }

    /// Whether everything is released and `waitUntilStopped` may return.
    var isStopped: Bool {
        if case .stopped = state { return true }
        return false
    }

    /// The instant a backoff wait ends, while waiting to reconnect.
    var reconnectDeadline: ContinuousClock.Instant? {
        switch state {
        case .running(let connection): return connection.reconnectDeadline
        case .idle, .stopRequested, .releasing, .stopped: return nil
        }
    }

    /// Publishes kept for the next CONNACK.
    var queuedPublishCount: Int { queuedPublishes.count }

    /// The new `connectionState` if it changed since the last call (for the state stream).
    mutating func takeConnectionStateChange() -> MQTTConnectionState? {
        guard connectionStateChanged else { return nil }
        connectionStateChanged = false
        return connectionState
    }

    // MARK: - Events from any thread

    /// `start()` or `run()` was called.
    mutating func startRequested() -> StartAction {
        guard case .idle = state else { return .none }
        state = .running(ConnectionStateMachine(policy: policy, brokers: brokers))
        return .startNetworkThread
    }

    /// `shutdown()` was called, the `run()` task was cancelled or the client was released.
    mutating func stopRequested() -> StopAction {
        switch state {
        case .idle:
            return .release(release(error: nil))
        case .running(var connection):
            // Already draining (a stop was taken): nothing new.
            guard !isStopping else { return .none }
            let next = connection.shutdownRequested()
            state = .stopRequested(connection, next: next)
            return .wakeNetworkThread
        case .stopRequested, .releasing, .stopped:
            return .none
        }
    }

    /// The network thread `startRequested` asked for could not be created: nothing will connect
    /// or carry out a stop, so everything is released with `error` by the caller (a stop asked
    /// meanwhile included). `nil` when there is nothing to release.
    mutating func networkThreadNotStarted(_ error: MQTTError) -> Release? {
        switch state {
        case .running, .stopRequested:
            return release(error: error)
        case .idle, .releasing, .stopped:
            return nil
        }
    }

    /// A publish was accepted into the in-flight window.
    mutating func publishRequested(_ publish: Publish, qos: MQTTQoS) -> PublishAction {
        if isStopping { return .reject(.shutdown) }
        if isConnected { return .handOver }
        guard qos > .atMostOnce else { return .reject(.notConnected) }
        queuedPublishes.append(publish)
        return .queued
    }

    /// `subscribe` was called: the subscription is remembered (replacing one with the same filter).
    mutating func subscribeRequested(_ subscription: MQTTSubscription, waiter: Waiter) -> RequestAction {
        if isStopping { return .reject(.shutdown) }
        subscriptions.removeAll { $0.filter == subscription.filter }
        subscriptions.append(subscription)
        return sendOrQueue(PendingRequest(request: .subscribe(subscription), waiter: waiter))
    }

    /// `unsubscribe` was called: the filter is no longer restored after a reconnect.
    mutating func unsubscribeRequested(_ filter: String, waiter: Waiter) -> RequestAction {
        if isStopping { return .reject(.shutdown) }
        subscriptions.removeAll { $0.filter == filter }
        return sendOrQueue(PendingRequest(request: .unsubscribe(filter), waiter: waiter))
    }

    private mutating func sendOrQueue(_ request: PendingRequest<Waiter>) -> RequestAction {
        guard isConnected else {
            queuedRequests.append(request)
            return .queued
        }
        return .send
    }

    // MARK: - Events from the network thread

    /// The network thread runs and may use the handle.
    mutating func networkThreadStarted(now: ContinuousClock.Instant) -> NetworkAction {
        switch state {
        case .running(var connection):
            let action = connection.start()
            state = .running(connection)
            return carryOut(action, now: now)
        case .stopRequested(let connection, _):
            // Stopped before the thread ran: nothing was opened.
            state = .running(connection)
            return .release(release(error: nil))
        case .idle, .releasing, .stopped:
            return .none
        }
    }

    /// The broker accepted CONNECT.
    mutating func connectSucceeded(sessionPresent: Bool, now: ContinuousClock.Instant) -> NetworkAction {
        updateConnection(now: now) {
            $0.connackAccepted(sessionPresent: sessionPresent, now: now)
        }
    }

    /// TCP/TLS failed, or the broker refused CONNECT (MQTT 5 refusals included).
    mutating func connectFailed(_ error: MQTTError, now: ContinuousClock.Instant, unitRandom: Double) -> NetworkAction {
        updateConnection(now: now) {
            $0.connectFailed(error, now: now, unitRandom: unitRandom)
        }
    }

    /// The socket closed or failed (socket error, keep-alive timeout, server DISCONNECT), while
    /// connecting or connected. `unacknowledged` are the requests libmosquitto had sent without
    /// an acknowledgement: they are sent again after the next CONNACK, before newer ones.
    mutating func connectionLost(
        _ error: MQTTError, unacknowledged: [PendingRequest<Waiter>], now: ContinuousClock.Instant, unitRandom: Double
    ) -> NetworkAction {
        queuedRequests.insert(contentsOf: unacknowledged, at: 0)
        let connecting: Bool
        switch state {
        case .running(let connection), .stopRequested(let connection, _):
            if case .connecting = connection.phase { connecting = true } else { connecting = false }
        case .idle, .releasing, .stopped:
            connecting = false
        }
        return updateConnection(now: now) {
            // Lost before the CONNACK is a failed attempt: no stable-connection reset.
            connecting
                ? $0.connectFailed(error, now: now, unitRandom: unitRandom)
                : $0.connectionLost(error, now: now, unitRandom: unitRandom)
        }
    }

    /// One pass of the network loop ended (the socket is open).
    mutating func loopPassCompleted(now: ContinuousClock.Instant) -> NetworkAction {
        takeStopRequest(now: now) ?? .none
    }

    /// The network thread woke from a backoff wait (the deadline passed, or a stop request woke it).
    mutating func backoffElapsed(now: ContinuousClock.Instant) -> NetworkAction {
        if let stop = takeStopRequest(now: now) { return stop }
        guard case .running(var connection) = state else { return .none }
        let action = connection.reconnectDue(now: now)
        state = .running(connection)
        if case .none = action, let until = connection.reconnectDeadline { return .keepWaiting(until: until) }
        return carryOut(action, now: now)
    }

    /// The drain ended and DISCONNECT went out (or could not).
    mutating func disconnectCompleted(now: ContinuousClock.Instant) -> NetworkAction {
        updateConnection(now: now) {
            $0.disconnected()
        }
    }

    /// The owner destroyed the handle and ended the streams.
    mutating func handleDestroyed() {
        guard case .releasing(let error) = state else { return }
        state = .stopped(error: error)
        report(.stopped(error: error))
    }

    // MARK: - Decisions

    /// A pending stop request becomes the network thread's next action.
    private mutating func takeStopRequest(now: ContinuousClock.Instant) -> NetworkAction? {
        guard case .stopRequested(let connection, let next) = state else { return nil }
        state = .running(connection)
        return carryOut(next, now: now)
    }

    /// Applies `event` to the connection machine inside the current state, then maps its action.
    private mutating func updateConnection(
        now: ContinuousClock.Instant, _ event: (inout ConnectionStateMachine) -> ConnectionStateMachine.Action
    ) -> NetworkAction {
        switch state {
        case .running(var connection):
            let action = event(&connection)
            state = .running(connection)
            return carryOut(action, now: now)
        case .stopRequested(var connection, let next):
            let action = event(&connection)
            state = .stopRequested(connection, next: next)
            switch action {
            case .stop:
                // The DISCONNECT's own close (draining): the stop is carried out now.
                state = .running(connection)
                return carryOut(action, now: now)
            case .connect, .markConnected, .scheduleReconnect, .giveUp, .disconnect, .none:
                // Shutdown already decided: the connection machine ignores the event.
                return .none
            }
        case .idle, .releasing, .stopped:
            return .none
        }
    }

    private mutating func carryOut(_ action: ConnectionStateMachine.Action, now: ContinuousClock.Instant) -> NetworkAction {
        switch action {
        case .connect(let attempt):
            report(.connecting(attempt: attempt))
            return .connect(attempt: attempt)
        case .markConnected(let sessionPresent, let resubscribe):
            // Deques are handed over as they are: `Array(emptyDeque)` writes to the shared
            // empty-array singleton, which ThreadSanitizer reports when two clients do it at once.
            let requests = queuedRequests
            queuedRequests.removeAll()
            let publishes = queuedPublishes
            queuedPublishes.removeAll()
            var resubscriptions: [MQTTSubscription] = []
            if resubscribe {
                // A filter a queued SUBSCRIBE is about to send again needs no second SUBSCRIBE.
                let pendingFilters = Set(
                    requests.compactMap { pending -> String? in
                        if case .subscribe(let s) = pending.request { return s.filter }
                        return nil
                    })
                resubscriptions = subscriptions.filter { !pendingFilters.contains($0.filter) }
            }
            report(.connected(sessionPresent: sessionPresent))
            return .sendAfterConnect(
                Resend(
                    sessionPresent: sessionPresent, resubscriptions: resubscriptions, requests: requests,
                    publishes: publishes))
        case .scheduleReconnect(let delay, let error):
            report(.disconnected(error: error, retryIn: delay))
            let until = reconnectDeadline ?? now + delay
            return .scheduleReconnect(until: until, delay: delay, error: error)
        case .giveUp(let error):
            return .release(release(error: error))
        case .disconnect:
            return .drainAndDisconnect(until: now + drainTimeout)
        case .stop:
            return .release(release(error: nil))
        case .none:
            return .none
        }
    }

    private mutating func release(error: MQTTError?) -> Release {
        let release = Release(error: error, publishes: queuedPublishes, requests: queuedRequests)
        queuedPublishes.removeAll()
        queuedRequests.removeAll()
        state = .releasing(error: error)
        return release
    }

    private mutating func report(_ newState: MQTTConnectionState) {
        connectionState = newState
        connectionStateChanged = true
    }
}

extension MQTTSessionStateMachine: Sendable where Publish: Sendable, Waiter: Sendable {}
extension MQTTSessionStateMachine.State: Sendable where Publish: Sendable, Waiter: Sendable {}
