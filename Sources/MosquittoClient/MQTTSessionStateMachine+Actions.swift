import DequeModule
import MQTTVocabulary

/// What the session machine's events return: the actions its owner carries out, and what it hands
/// back to resend after a CONNACK or to fail when the client stops.
extension MQTTSessionStateMachine {
    /// What `startRequested` asks of the owner.
    enum StartAction: Equatable {
        /// Start the network thread (it then reports `networkThreadStarted`).
        case startNetworkThread
        /// Already started or stopped: nothing.
        case none
    }

    /// What `stopRequested` asks of the owner.
    enum StopAction {
        /// No network thread ever ran: release everything here, on the caller's thread.
        case release(Release)
        /// Wake the network thread from a backoff wait; it carries out the stop.
        case wakeNetworkThread
        /// Already stopping or stopped: nothing.
        case none
    }

    /// What `publishRequested` asks of the owner.
    enum PublishAction: Equatable {
        /// Connected: hand the publish to libmosquitto now (still under the owner's lock, so it
        /// cannot overtake publishes sent after a CONNACK).
        case handOver
        /// Disconnected: the machine keeps it and returns it after the next CONNACK.
        case queued
        /// Refused with this error (QoS 0 while disconnected, or the client is stopping).
        case reject(MQTTError)
    }

    /// What `subscribeRequested`/`unsubscribeRequested` asks of the owner.
    enum RequestAction: Equatable {
        /// Connected: send it now and wait for the acknowledgement.
        case send
        /// Disconnected: the machine keeps it and returns it after the next CONNACK.
        case queued
        /// Refused with this error (the client is stopping).
        case reject(MQTTError)
    }

    /// What the network thread must do next.
    enum NetworkAction {
        /// Open a connection (TCP, TLS, CONNECT with our properties); `attempt` is for logs.
        case connect(attempt: Int)
        /// CONNACK accepted: send `resend` in its order before the owner's lock is released.
        case sendAfterConnect(Resend)
        /// Not connected: wait until `until` (woken early only by a stop request), then report
        /// `backoffElapsed`. `delay` and `error` are for the log.
        case scheduleReconnect(until: ContinuousClock.Instant, delay: Duration, error: MQTTError)
        /// Woken before the backoff elapsed: wait again until `until`.
        case keepWaiting(until: ContinuousClock.Instant)
        /// Shutdown while connected: wait for outstanding acknowledgements until `until`, send
        /// DISCONNECT (no Last Will), then report `disconnectCompleted`.
        case drainAndDisconnect(until: ContinuousClock.Instant)
        /// Fail what is listed, destroy the handle, end the streams, then report `handleDestroyed`.
        case release(Release)
        /// Nothing changes; carry on.
        case none
    }

    /// What to send after a CONNACK, in this order.
    struct Resend {
        /// Whether the broker kept our session.
        var sessionPresent: Bool
        /// Known subscriptions the broker lost (no session) and no queued request covers.
        var resubscriptions: [MQTTSubscription]
        /// Requests that waited for a connection, oldest first (unacknowledged ones of the
        /// last connection first).
        var requests: Deque<PendingRequest<Waiter>>
        /// Publishes accepted while disconnected, in order.
        var publishes: Deque<Publish>
    }

    /// What is left when the client stops: everything here fails with `error ?? .shutdown`.
    struct Release {
        /// Why the client stopped (`nil`: shutdown was asked).
        var error: MQTTError?
        /// Publishes that never reached libmosquitto.
        var publishes: Deque<Publish>
        /// Requests that were never sent or never acknowledged.
        var requests: Deque<PendingRequest<Waiter>>
    }
}

extension MQTTSessionStateMachine.Resend: Sendable where Publish: Sendable, Waiter: Sendable {}
extension MQTTSessionStateMachine.Release: Sendable where Publish: Sendable, Waiter: Sendable {}
extension MQTTSessionStateMachine.NetworkAction: Sendable where Publish: Sendable, Waiter: Sendable {}
extension MQTTSessionStateMachine.StopAction: Sendable where Publish: Sendable, Waiter: Sendable {}
extension MQTTSessionStateMachine.Resend: Equatable where Publish: Equatable, Waiter: Equatable {}
extension MQTTSessionStateMachine.Release: Equatable where Publish: Equatable, Waiter: Equatable {}
extension MQTTSessionStateMachine.NetworkAction: Equatable where Publish: Equatable, Waiter: Equatable {}
extension MQTTSessionStateMachine.StopAction: Equatable where Publish: Equatable, Waiter: Equatable {}
