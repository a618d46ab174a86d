import DequeModule
import MQTTVocabulary

/// Matches libmosquitto's acknowledgement callbacks to the requests that caused them.
///
/// libmosquitto hands out the message id (`mid`) when `mosquitto_publish`/`subscribe` returns,
/// but the network thread may already have received the PUBACK/SUBACK by then. An
/// acknowledgement for an id nobody has bound yet is kept as "early" and handed to `bind`.
/// Pure value type; the owner keeps it under a lock.
struct AckTable<Value, Ack> {
    private var waiting: [Int32: Value] = [:]
    private var early: [Int32: Ack] = [:]

    /// Requests bound to a message id and not yet acknowledged.
    var count: Int { waiting.count }

    /// Records that `mid` belongs to `value`. Returns the acknowledgement if it already arrived
    /// (then `value` is not stored: the caller completes it).
    mutating func bind(_ mid: Int32, _ value: Value) -> Ack? {
        if let ack = early.removeValue(forKey: mid) { return ack }
        waiting[mid] = value
        return nil
    }

    /// The broker acknowledged `mid`. Returns the request it completes, or `nil` when the id is
    /// not bound yet (kept as early).
    mutating func acknowledged(_ mid: Int32, _ ack: Ack) -> Value? {
        if let value = waiting.removeValue(forKey: mid) { return value }
        early[mid] = ack
        return nil
    }

    /// Removes and returns every bound request matching `predicate`.
    mutating func removeAll(where predicate: (Value) -> Bool) -> [Value] {
        var removed: [Value] = []
        for (mid, value) in waiting where predicate(value) {
            removed.append(value)
            waiting[mid] = nil
        }
        return removed
    }
}

/// A publish handed to libmosquitto and waiting for its acknowledgement.
struct PendingPublish<Completion> {
    /// Our id for it.
    var id: MQTTPublishID
    /// Its QoS (QoS 0 completes on write; it is lost, not resent, when the connection drops).
    var qos: MQTTQoS
    /// How to tell the publisher.
    var completion: Completion
}

/// The bounded window of publishes accepted and not yet completed (`MQTTConfiguration.maxInFlight`).
///
/// Every accepted publish holds one slot from acceptance (also while queued during an outage)
/// until its acknowledgement or failure. When the window is full, async publishers wait in FIFO
/// order; a freed slot goes straight to the oldest waiter. Pure value type, kept under a lock.
struct InFlightWindow<Completion, RoomWaiter> {
    /// Maximum slots.
    let limit: Int
    /// Slots in use.
    private(set) var used = 0
    private var nextID: UInt64 = 1
    /// Publishes handed to libmosquitto, by message id.
    var publishes = AckTable<PendingPublish<Completion>, Int32>()
    private var roomWaiters: Deque<(token: UInt64, waiter: RoomWaiter)> = []

    init(limit: Int) {
        self.limit = limit
    }

    /// Publishers waiting for room.
    var waiterCount: Int { roomWaiters.count }

    /// Takes a slot if one is free.
    mutating func tryReserve() -> MQTTPublishID? {
        guard used < limit, roomWaiters.isEmpty else { return nil }
        used += 1
        return makeID()
    }

    /// Takes a slot, or queues `waiter` (under `token`) for the next free one and returns `nil`.
    mutating func reserveOrWait(token: UInt64, _ waiter: RoomWaiter) -> MQTTPublishID? {
        if let id = tryReserve() { return id }
        roomWaiters.append((token, waiter))
        return nil
    }

    /// Removes a waiter (its task was cancelled). `nil` if it already got a slot.
    mutating func cancelWait(token: UInt64) -> RoomWaiter? {
        guard let index = roomWaiters.firstIndex(where: { $0.token == token }) else { return nil }
        return roomWaiters.remove(at: index).waiter
    }

    /// Waiters are woken only once this many slots are free (an eighth of the window): a
    /// publisher that found the window full then sends a batch without suspending again, instead
    /// of one task resumption per acknowledgement (measured: halves QoS 0 throughput otherwise).
    var wakeBatch: Int { max(1, limit / 8) }

    /// A slot is free again. Returns the waiters that now get a slot each, with the ids they own
    /// (none until `wakeBatch` slots are free).
    mutating func releaseSlot() -> [(RoomWaiter, MQTTPublishID)] {
        used = max(used - 1, 0)
        guard !roomWaiters.isEmpty, limit - used >= wakeBatch else { return [] }
        var woken: [(RoomWaiter, MQTTPublishID)] = []
        while used < limit, let next = roomWaiters.popFirst() {
            used += 1
            woken.append((next.waiter, makeID()))
        }
        return woken
    }

    /// Removes every waiter (shutdown).
    mutating func removeAllWaiters() -> [RoomWaiter] {
        let all = roomWaiters.map(\.waiter)
        roomWaiters.removeAll()
        return all
    }

    private mutating func makeID() -> MQTTPublishID {
        defer { nextID += 1 }
        return MQTTPublishID(rawValue: nextID)
    }
}

extension AckTable: Sendable where Value: Sendable, Ack: Sendable {}
extension PendingPublish: Sendable where Completion: Sendable {}
extension InFlightWindow: Sendable where Completion: Sendable, RoomWaiter: Sendable {}
