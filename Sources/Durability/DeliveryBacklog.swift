import BridgeVocabulary
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
/// **A failing disk degrades the spool, not the data** (docs/contract.md §7.6). When the spool
/// cannot write (``SpoolError/isDiskFailure``: ENOSPC, EIO, EDQUOT, a failed `fdatasync`), new
/// messages go to a *memory tail* within the same limits and overflow policy, under the
/// sequences right after the spool's last, so ``pending(after:limit:)`` and ``acknowledge(_:)``
/// work across the boundary. ``resumeSpool()`` (the owner calls it about once a second) writes
/// the tail into the spool in order — the tail's acknowledged records as empty placeholders,
/// acknowledged at once, so the spool's sequences stay consecutive (its acknowledged head is
/// skipped instead when the spool is all delivered) — and leaves the degraded
/// state when every write succeeded. The tail is in memory only: a crash while degraded loses
/// it, and only it.
///
/// Not `Sendable`: one task owns it (like ``Spool``), calls block on file I/O when persistent.
public final class DeliveryBacklog {
    /// The bounds in force.
    public let limits: BufferLimits
    /// The overflow policy in force. A reload may change it (a bridge whose rules move the MQTT →
    /// Pusher default); what is held stays, and the new policy applies from the next message.
    public var overflow: BufferOverflowPolicy
    /// Totals since creation (drops are not persisted across restarts).
    public private(set) var counters = BufferCounters()

    private let spool: Spool?
    /// Memory storage: records above `memoryWatermark`, consecutive; nil = acknowledged.
    private var memory: Deque<SpoolRecord?> = []
    private var memoryWatermark: UInt64 = 0
    private var memoryLastSequence: UInt64 = 0
    private var memoryCount = 0
    private var memoryBytes = 0
    /// The memory tail of a degraded spool: records with the sequences after the spool's last and
    /// the `tailSkipped` acknowledged ones right after it (`spool.lastSequence + tailSkipped + 1`
    /// onwards); nil = acknowledged. Empty while the spool is not degraded.
    private var tail: Deque<SpoolRecord?> = []
    /// Acknowledged tail records before `tail`'s first, counted only (never stored).
    private var tailSkipped: UInt64 = 0
    private var tailCount = 0
    private var tailBytes = 0

    /// True while the spool is degraded: a write or flush failed and ``resumeSpool()`` has not
    /// succeeded since; new messages wait in memory only.
    public private(set) var isSpoolDegraded = false
    /// The failure that degraded the spool (the latest one while it stays degraded).
    public private(set) var spoolFailure: SpoolError?

    /// The most messages held since the backlog was last empty.
    private var heldCountPeak = 0
    /// Messages whose storage (`memory`, `tail`) is kept when the backlog drains; a larger burst's
    /// is released (a deque keeps the capacity of its largest size otherwise).
    static var retainedStorage: Int { 64 }

    /// A backlog in memory only (`persist = false`): lost on restart.
    public init(limits: BufferLimits, overflow: BufferOverflowPolicy) {
        self.limits = limits
        self.overflow = overflow
        self.spool = nil
    }

    /// A backlog persisted in `spool` (`persist = true`); it starts with what the spool recovered,
    /// less the empty records: placeholders of messages acknowledged while the spool was degraded
    /// whose acknowledgement did not reach the disk (a persistent backlog's messages are never
    /// empty: the daemon's records carry at least their format version).
    public init(limits: BufferLimits, overflow: BufferOverflowPolicy, spool: Spool) {
        self.limits = limits
        self.overflow = overflow
        self.spool = spool
        let base = spool.deliveredWatermark
        let placeholders = spool.index.indices.filter { spool.index[$0].length == 0 }.map { base + UInt64($0) + 1 }
        for sequence in placeholders { _ = try? spool.acknowledge(sequence) }
    }

    /// True when backed by a spool.
    public var isPersistent: Bool { spool != nil }
    /// Messages not yet acknowledged.
    public var count: Int { spool.map { $0.pendingCount + tailCount } ?? memoryCount }
    /// Payload bytes not yet acknowledged.
    public var byteCount: Int { spool.map { $0.pendingBytes + tailBytes } ?? memoryBytes }
    /// Messages not yet acknowledged that only memory holds: the tail of a degraded spool (all of
    /// them without a spool). A crash loses these.
    public var memoryOnlyCount: Int { spool == nil ? memoryCount : tailCount }

    /// Offers a message; see ``BacklogAdmission``.
    ///
    /// - Throws: only a ``SpoolError`` of a persistent backlog that is not a disk failure (a
    ///   closed spool, a payload over its limit); a disk failure degrades the spool instead.
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
        heldCountPeak = max(heldCountPeak, count)
        counters.stored += 1
        counters.droppedOldest += dropped.count
        return dropped.isEmpty
            ? .stored(sequence: sequence) : .storedDroppingOldest(sequence: sequence, dropped: dropped)
    }

    /// Offers several messages in order; for a persistent backlog with room for all of them,
    /// they reach the spool in one write. Otherwise each is offered like ``enqueue(_:)``.
    ///
    /// - Throws: like ``enqueue(_:)`` (messages before the failing one may have been stored: their
    ///   admissions are lost with the error, as with a sequence of ``enqueue(_:)`` calls).
    public func enqueue(contentsOf payloads: [[UInt8]]) throws -> [BacklogAdmission] {
        let size = payloads.reduce(0) { $0 + $1.count }
        if let spool, !isSpoolDegraded, payloads.count > 1, count + payloads.count <= limits.maxMessages,
            byteCount + size <= limits.maxBytes, payloads.allSatisfy({ $0.count <= limits.maxBytes })
        {
            let before = spool.lastSequence
            do {
                let sequences = try spool.append(contentsOf: payloads)
                counters.stored += sequences.count
                return sequences.map { .stored(sequence: $0) }
            } catch let error as SpoolError where error.isDiskFailure {
                // The records before the failing write are in the spool; the rest go to memory.
                spoolFailed(error)
                let written = Int(spool.lastSequence - before)
                counters.stored += written
                let stored = (0..<written).map { BacklogAdmission.stored(sequence: before + UInt64($0) + 1) }
                return stored + (try payloads[written...].map { try enqueue($0) })
            }
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
        if let spool {
            var result = try spool.read(after: after, limit: limit)
            guard result.count < limit, !tail.isEmpty else { return result }
            let first = tailFirstSequence(spool)
            var position = after >= first ? Int(clamping: after - first + 1) : 0
            while position < tail.count, result.count < limit {
                if let record = tail[position] { result.append(record) }
                position += 1
            }
            return result
        }
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
        if removed {
            counters.removed += 1
            if count == 0 { drained() }
        }
        return removed
    }

    /// The backlog is empty: after a large one, what held its messages (and the buffers around
    /// them) is freed. Giving the freed memory back to the system is the daemon's (its supervisor's
    /// `MemoryRelease`, after any backlog of the bridge drained: docs/architecture.md).
    private func drained() {
        if heldCountPeak > Self.retainedStorage {
            memory = []
            tail = []
        }
        heldCountPeak = 0
    }

    // MARK: storage

    /// The sequence of the oldest message not acknowledged yet (nil when empty): every message
    /// under it is settled (the dead-letter redrive waits for its own, docs/contract.md §8.3).
    public var oldestPendingSequence: UInt64? { oldestPending }

    private var oldestPending: UInt64? {
        if let spool { return spool.oldestPending?.sequence ?? tail.first??.sequence }
        return memory.first??.sequence
    }

    /// The sequence of `tail`'s first entry.
    private func tailFirstSequence(_ spool: Spool) -> UInt64 {
        spool.lastSequence + tailSkipped + 1
    }

    private func acknowledgeDropped(_ sequence: UInt64) throws {
        _ = try remove(sequence)
    }

    private func store(_ payload: [UInt8]) throws -> UInt64 {
        if let spool {
            if !isSpoolDegraded {
                let before = spool.lastSequence
                do { return try spool.append(payload) } catch let error as SpoolError where error.isDiskFailure {
                    spoolFailed(error)
                    // Written, but the fsync policy's flush failed: it is in the spool.
                    if spool.lastSequence > before { return spool.lastSequence }
                }
            }
            let sequence = tailFirstSequence(spool) + UInt64(tail.count)
            tail.append(SpoolRecord(sequence: sequence, payload: Self.withoutSpareCapacity(payload)))
            tailCount += 1
            tailBytes += payload.count
            return sequence
        }
        memoryLastSequence += 1
        memory.append(SpoolRecord(sequence: memoryLastSequence, payload: Self.withoutSpareCapacity(payload)))
        memoryCount += 1
        memoryBytes += payload.count
        return memoryLastSequence
    }

    /// `payload` as kept in memory until delivered: copied into an array of its own size when it has a
    /// page or more of spare capacity. An array built by appends ends with up to twice the capacity it
    /// needs (the record encoders append a few bytes after the payload, which doubles it), and a
    /// held message's spare pages are resident: measured with 64 MiB of 8 KB messages held in
    /// memory, RSS grew by 1.7–1.9 × the bytes held before this copy (Benchmarks/results/memory).
    static func withoutSpareCapacity(_ payload: [UInt8]) -> [UInt8] {
        guard payload.capacity - payload.count >= 4096 else { return payload }
        return [UInt8](unsafeUninitializedCapacity: payload.count) { buffer, initialized in
            initialized = buffer.initialize(fromContentsOf: payload)
        }
    }

    private func remove(_ sequence: UInt64) throws -> Bool {
        if let spool {
            if sequence <= spool.lastSequence {
                do { return try spool.acknowledge(sequence) } catch let error as SpoolError where error.isDiskFailure {
                    // The acknowledgement took effect; only its record (or a compaction) failed to
                    // reach the disk: at worst the message is delivered again after a crash.
                    spoolFailed(error)
                    return true
                }
            }
            return removeFromTail(sequence, first: tailFirstSequence(spool))
        }
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

    private func removeFromTail(_ sequence: UInt64, first: UInt64) -> Bool {
        guard sequence >= first, sequence - first < UInt64(tail.count) else { return false }
        let position = Int(sequence - first)
        guard let record = tail[position] else { return false }
        tail[position] = nil
        tailCount -= 1
        tailBytes -= record.payload.count
        trimTail()
        return true
    }

    /// Keeps `tail`'s first entry pending: leading acknowledged entries are only counted.
    private func trimTail() {
        while let first = tail.first, first == nil {
            tail.removeFirst()
            tailSkipped += 1
        }
    }

    // MARK: a degraded spool

    /// The spool failed to write or flush (the owner reports failed syncs here): degraded until
    /// ``resumeSpool()`` succeeds. No-op without a spool.
    public func spoolFailed(_ error: SpoolError) {
        guard spool != nil else { return }
        isSpoolDegraded = true
        spoolFailure = error
    }

    /// Tries to leave the degraded state: frees the spool's segments when everything in them is
    /// delivered, writes the pending acknowledgement record and then the memory tail into the
    /// spool, in order (acknowledged tail records as empty placeholders,
    /// acknowledged at once). What was written leaves the tail even when a later write fails.
    ///
    /// - Returns: true when the spool is not degraded (any more).
    @discardableResult
    public func resumeSpool() -> Bool {
        guard let spool, isSpoolDegraded else { return true }
        do {
            // Everything on disk is delivered: give its space back first (a full disk needs it),
            // and skip the tail's acknowledged head instead of writing placeholders for it.
            if try spool.restartEmptyIfDelivered(skipping: tailSkipped) { tailSkipped = 0 }
            try spool.writeAcknowledgement()
            while tailSkipped > 0 || !tail.isEmpty {
                let placeholders = tailSkipped > 0
                let chunk: [[UInt8]] =
                    placeholders
                    ? Array(repeating: [], count: Int(min(tailSkipped, 4096)))
                    : tail.prefix(256).map { $0?.payload ?? [] }
                let before = spool.lastSequence
                do { _ = try spool.append(contentsOf: chunk) } catch {
                    moved(Int(spool.lastSequence - before), after: before, placeholders: placeholders, into: spool)
                    throw error
                }
                moved(chunk.count, after: before, placeholders: placeholders, into: spool)
            }
        } catch let error as SpoolError {
            spoolFailure = error
            return false
        } catch {
            return false
        }
        isSpoolDegraded = false
        spoolFailure = nil
        return true
    }

    /// `count` tail entries now have their records in the spool, from sequence `before + 1`:
    /// takes them off the tail and acknowledges the placeholders of acknowledged ones.
    private func moved(_ count: Int, after before: UInt64, placeholders: Bool, into spool: Spool) {
        for offset in 0..<count {
            let sequence = before + UInt64(offset) + 1
            var acknowledged = placeholders
            if placeholders {
                tailSkipped -= 1
            } else if let record = tail.removeFirst() {
                tailCount -= 1
                tailBytes -= record.payload.count
            } else {
                acknowledged = true
            }
            // A failure to write the acknowledgement record leaves the acknowledgement in force
            // (the next sync or resume writes it): at worst a placeholder is read again after a crash.
            if acknowledged { _ = try? spool.acknowledge(sequence) }
        }
        trimTail()
    }
}
