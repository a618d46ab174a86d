import BridgeCore
import DequeModule

/// What happened to a message offered to a ``DeliveryBacklog``. The owner counts and logs
/// every drop (docs/contract.md §4: "every drop is counted and logged"; §5.2 dead letters).
public enum BacklogAdmission: Sendable, Equatable {
    /// Stored under this sequence; nothing dropped.
    case stored(sequence: UInt64)
    /// Stored under `sequence` after dropping these oldest undelivered messages (drop-oldest).
    /// A dropped message that was in flight may still arrive; its later acknowledgement is a no-op.
    case storedDroppingOldest(sequence: UInt64, dropped: [UInt64])
    /// The backlog is full and the policy is drop-newest: the message was not stored.
    case droppedNewest
    /// The message alone exceeds `maxBytes`: not stored under either policy.
    case droppedOversize
}

/// One bridge direction's undelivered messages (docs/contract.md §4 `[bridge.buffer]`): bounded by count
/// and bytes with the configured overflow policy, kept in memory or — with `persist = true` —
/// in a ``Spool`` so that a daemon restart loses nothing.
///
/// Delivery protocol, the same for both storages: ``enqueue(_:)`` returns a sequence number;
/// the delivery task reads ``pending(after:limit:)`` in order, delivers, and calls
/// ``acknowledge(_:)`` for each delivered sequence (any order). Limits count every message
/// not yet acknowledged, including ones in flight.
///
/// Not `Sendable`: one task owns it (like ``Spool``), calls block on file I/O when persistent.
public final class DeliveryBacklog {
    /// The bounds in force.
    public let limits: BufferLimits
    /// The overflow policy in force.
    public let overflow: BufferOverflowPolicy
    /// Totals since creation (drops are not persisted across restarts).
    public private(set) var counters = BufferCounters()

    private let spool: Spool?
    /// Memory storage: records above `memoryWatermark`, consecutive; nil = acknowledged.
    private var memory: Deque<SpoolRecord?> = []
    private var memoryWatermark: UInt64 = 0
    private var memoryLastSequence: UInt64 = 0
    private var memoryCount = 0
    private var memoryBytes = 0

    /// A backlog in memory only (`persist = false`): lost on restart.
    public init(limits: BufferLimits, overflow: BufferOverflowPolicy) {
        self.limits = limits
        self.overflow = overflow
        self.spool = nil
    }

    /// A backlog persisted in `spool` (`persist = true`); it starts with what the spool recovered.
    public init(limits: BufferLimits, overflow: BufferOverflowPolicy, spool: Spool) {
        self.limits = limits
        self.overflow = overflow
        self.spool = spool
    }

    /// True when backed by a spool.
    public var isPersistent: Bool { spool != nil }
    /// Messages not yet acknowledged.
    public var count: Int { spool?.pendingCount ?? memoryCount }
    /// Payload bytes not yet acknowledged.
    public var byteCount: Int { spool?.pendingBytes ?? memoryBytes }

    /// Offers a message; see ``BacklogAdmission``.
    ///
    /// - Throws: only ``SpoolError`` from a persistent backlog's disk.
    public func enqueue(_ payload: [UInt8]) throws -> BacklogAdmission {
        let size = payload.count
        if size > limits.maxBytes {
            counters.droppedOversize += 1
            return .droppedOversize
        }
        var dropped: [UInt64] = []
        // `backpressure` drops nothing: its producer waits for ``hasRoom(messages:bytes:)`` first,
        // and what arrives anyway (a shutdown, a timer's release) is stored over the limits.
        while overflow != .backpressure, count >= limits.maxMessages || byteCount + size > limits.maxBytes {
            guard overflow == .dropOldest, let oldest = oldestPending else {
                counters.droppedNewest += 1
                return .droppedNewest
            }
            try acknowledgeDropped(oldest)
            dropped.append(oldest)
        }
        let sequence = try store(payload)
        counters.stored += 1
        counters.droppedOldest += dropped.count
        return dropped.isEmpty
            ? .stored(sequence: sequence) : .storedDroppingOldest(sequence: sequence, dropped: dropped)
    }

    /// Offers several messages in order; for a persistent backlog with room for all of them,
    /// they reach the spool in one write. Otherwise each is offered like ``enqueue(_:)``.
    ///
    /// - Throws: only ``SpoolError`` from a persistent backlog's disk (messages before the
    ///   failing one may have been stored: their admissions are lost with the error, as with a
    ///   sequence of ``enqueue(_:)`` calls).
    public func enqueue(contentsOf payloads: [[UInt8]]) throws -> [BacklogAdmission] {
        let size = payloads.reduce(0) { $0 + $1.count }
        if let spool, payloads.count > 1, count + payloads.count <= limits.maxMessages, byteCount + size <= limits.maxBytes,
            payloads.allSatisfy({ $0.count <= limits.maxBytes })
        {
            let sequences = try spool.append(contentsOf: payloads)
            counters.stored += sequences.count
            return sequences.map { .stored(sequence: $0) }
        }
        return try payloads.map { try enqueue($0) }
    }

    /// Whether `messages` more messages of `bytes` payload bytes in all fit within the limits
    /// now. An empty backlog always has room, so that a burst larger than the limits cannot wait
    /// for ever (the `backpressure` producer's wait, docs/contract.md §7.6).
    public func hasRoom(messages: Int, bytes: Int) -> Bool {
        count == 0 || (count + messages <= limits.maxMessages && byteCount + bytes <= limits.maxBytes)
    }

    /// Up to `limit` undelivered messages with a sequence above `after`, in order.
    public func pending(after: UInt64 = 0, limit: Int) throws -> [SpoolRecord] {
        if let spool { return try spool.read(after: after, limit: limit) }
        var result: [SpoolRecord] = []
        let start = after > memoryWatermark ? Int(after - memoryWatermark) : 0
        var position = start
        while position < memory.count, result.count < limit {
            if let record = memory[position] { result.append(record) }
            position += 1
        }
        return result
    }

    /// Marks a message delivered. Returns false if it was not pending (already acknowledged,
    /// dropped, or unknown).
    @discardableResult
    public func acknowledge(_ sequence: UInt64) throws -> Bool {
        let removed = try remove(sequence)
        if removed { counters.removed += 1 }
        return removed
    }

    // MARK: storage

    private var oldestPending: UInt64? {
        if let spool { return spool.oldestPending?.sequence }
        return memory.first??.sequence
    }

    private func acknowledgeDropped(_ sequence: UInt64) throws {
        _ = try remove(sequence)
    }

    private func store(_ payload: [UInt8]) throws -> UInt64 {
        if let spool { return try spool.append(payload) }
        memoryLastSequence += 1
        memory.append(SpoolRecord(sequence: memoryLastSequence, payload: payload))
        memoryCount += 1
        memoryBytes += payload.count
        return memoryLastSequence
    }

    private func remove(_ sequence: UInt64) throws -> Bool {
        if let spool { return try spool.acknowledge(sequence) }
        guard sequence > memoryWatermark, sequence <= memoryLastSequence else { return false }
        let position = Int(sequence - memoryWatermark - 1)
        guard let record = memory[position] else { return false }
        memory[position] = nil
        memoryCount -= 1
        memoryBytes -= record.payload.count
        while let first = memory.first, first == nil {
            memory.removeFirst()
            memoryWatermark += 1
        }
        return true
    }
}
