import BridgeCore
import MosquittoClient

/// Everything the runtime's one lock guards (``BridgeRuntime/decisions``): the supervisor, the
/// two pure parts BridgeCore cannot hold because their types are the MQTT client's (the session
/// takeover detector, and the correlation of publishes with the client's acknowledgements), and
/// the tasks waiting for a decision (lanes held by the 403 pause, webhook requests waiting for
/// their turn at the outbox). No I/O and no other lock under it.
struct RuntimeDecisions: Sendable {
    typealias Correlation = PublishCorrelation<MQTTPublishID, OutboxEntry<OutgoingMQTT>, MQTTPublishCompletion>

    var supervisor: BridgeSupervisor
    /// Another process taking the MQTT session over (BridgeRuntime+SessionTakeover.swift).
    var sessionTakeover = MQTTSessionTakeoverDetector()
    /// Publishes in flight to the broker, paired with their acknowledgements.
    var correlation = Correlation()
    /// MQTT → Pusher lanes waiting while delivery is paused, woken when it resumes or the bridge stops.
    var pausedLanes = Waiters()
    /// Set once the lanes stop (the bridge stops): from then on no lane waits for the pause.
    var pausedLanesReleased = false
    /// Webhook requests waiting for their turn at the outbox, by ticket.
    var webhookTurns: [UInt64: CheckedContinuation<Void, Never>] = [:]
    /// How many MQTT connection states the state watcher has taken in, and the publishers waiting
    /// for the next one (the client refused a publish as not connected before the watcher saw the drop).
    var mqttStates: UInt64 = 0
    var mqttStateWaiters = Waiters()
}

/// Tasks waiting for something another task decides, each by an id.
struct Waiters: Sendable {
    private var waiting: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var next: UInt64 = 0

    /// An id for a task about to wait.
    mutating func ticket() -> UInt64 {
        defer { next += 1 }
        return next
    }

    mutating func add(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>) { waiting[id] = continuation }

    /// The waiter with `id`, no longer waiting (to be resumed outside the lock).
    mutating func remove(_ id: UInt64) -> CheckedContinuation<Void, Never>? { waiting.removeValue(forKey: id) }

    /// Every waiter, no longer waiting (to be resumed outside the lock).
    mutating func removeAll() -> [CheckedContinuation<Void, Never>] {
        defer { waiting.removeAll() }
        return Array(waiting.values)
    }
}
