import Synchronization

/// Tasks parked until their owner hands each of them a `Value`, first come first served: the one
/// waiter table of every queue in the project (an outbox's consumer and producer, the delivery
/// lanes, a connection gate, the MQTT message buffer, the HTTP pool's requests, …).
///
/// A value type kept inside the owner's ``Locked`` state, next to what its waiters wait for, so
/// that "is it ready?" and "park me" happen under one lock and no wake-up can fall between them.
/// Tasks park through ``Locked/wait(in:until:ifCancelled:)`` (which also removes a cancelled
/// waiter, and with a deadline one whose time is up); the owner wakes them with
/// ``resumeFirst(returning:)`` or ``resumeAll(returning:)`` under its lock and calls
/// ``WakeUp/resume()`` on the result after releasing it.
///
/// A queue that emptied gives its storage back when it had grown past ``retainedCapacity``
/// (a burst of waiters does not keep its peak allocation for the life of the process).
public struct WaiterQueue<Value: Sendable>: Sendable {
    /// Identifies one wait, so that its cancellation (or deadline) removes that waiter and no other.
    public struct Ticket: Hashable, Sendable {
        let rawValue: UInt64

        /// A ticket no other wait in this process has.
        static func next() -> Ticket {
            Ticket(rawValue: ticketCounter.wrappingAdd(1, ordering: .relaxed).oldValue)
        }
    }

    /// Waiters in the order they parked; slots before `head` were resumed and are empty.
    private var slots: [(ticket: Ticket, continuation: CheckedContinuation<Value, Never>)?] = []
    private var head = 0

    /// Storage kept when the queue empties; more is released.
    public static var retainedCapacity: Int { 16 }

    /// An empty queue.
    public init() {}

    /// How many tasks wait.
    public var count: Int { slots.count - head }

    /// Whether no task waits.
    public var isEmpty: Bool { head == slots.count }

    /// The waiters the storage has room for now (tests: the peak is released after a drain).
    public var storageCapacity: Int { slots.capacity }

    /// Parks `continuation` under `ticket`, behind every waiter already parked.
    mutating func park(_ continuation: CheckedContinuation<Value, Never>, ticket: Ticket) {
        slots.append((ticket, continuation))
    }

    /// Takes the longest-waiting task out; it gets `value` when the result is resumed. Nothing
    /// when no task waits.
    public mutating func resumeFirst(returning value: Value) -> WakeUp<Value> {
        guard head < slots.count, let first = slots[head] else { return WakeUp() }
        slots[head] = nil
        head += 1
        compact()
        return WakeUp(first.continuation, value)
    }

    /// Takes every waiting task out; each gets `value` when the result is resumed.
    public mutating func resumeAll(returning value: Value) -> WakeUp<Value> {
        guard !isEmpty else { return WakeUp() }
        let continuations = slots[head...].compactMap { $0?.continuation }
        slots.removeAll(keepingCapacity: slots.capacity <= Self.retainedCapacity)
        head = 0
        return WakeUp(continuations, value)
    }

    /// Takes out the waiter of `ticket` (its task was cancelled, or its deadline passed); it gets
    /// `value`. Nothing when that waiter was resumed already (or never parked).
    public mutating func remove(_ ticket: Ticket, returning value: Value) -> WakeUp<Value> {
        guard let index = slots[head...].firstIndex(where: { $0?.ticket == ticket }), let slot = slots[index] else {
            return WakeUp()
        }
        slots.remove(at: index)
        compact()
        return WakeUp(slot.continuation, value)
    }

    /// Drops resumed slots: all of them once the queue is empty (and the storage, when it grew
    /// past ``retainedCapacity``), else once they are the larger part of the storage.
    private mutating func compact() {
        if head == slots.count {
            slots.removeAll(keepingCapacity: slots.capacity <= Self.retainedCapacity)
            head = 0
        } else if head >= Self.retainedCapacity, head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
    }
}

/// Tasks taken out of a ``WaiterQueue`` under the owner's lock, resumed by ``resume()`` once the
/// lock is released (a resumed task that takes the same lock at once then does not wait for it).
/// Resuming an empty wake-up does nothing.
public struct WakeUp<Value: Sendable>: Sendable {
    private enum Tasks: Sendable {
        case none
        case one(CheckedContinuation<Value, Never>)
        case many([CheckedContinuation<Value, Never>])
    }

    private var tasks: Tasks
    private var value: Value?

    /// No task.
    public init() {
        tasks = .none
        value = nil
    }

    init(_ continuation: CheckedContinuation<Value, Never>, _ value: Value) {
        tasks = .one(continuation)
        self.value = value
    }

    init(_ continuations: [CheckedContinuation<Value, Never>], _ value: Value) {
        tasks = .many(continuations)
        self.value = value
    }

    /// How many tasks this wakes.
    public var count: Int {
        switch tasks {
        case .none: 0
        case .one: 1
        case .many(let continuations): continuations.count
        }
    }

    /// Resumes the tasks, each with the value they were taken out with. Call it once.
    public func resume() {
        guard let value else { return }
        switch tasks {
        case .none:
            break
        case .one(let continuation):
            continuation.resume(returning: value)
        case .many(let continuations):
            for continuation in continuations { continuation.resume(returning: value) }
        }
    }
}

/// The source of ``WaiterQueue/Ticket``s: one counter for the process, so that a ticket is taken
/// before its wait parks (the cancellation handler needs it) without taking the owner's lock.
private let ticketCounter = Atomic<UInt64>(0)
