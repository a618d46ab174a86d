import BridgeCore
import DequeModule
import Durability
import Locking
import Logging

/// Something an ``Outbox`` can hold: it knows its bytes in the backlog (and on disk).
protocol OutboxItem: Sendable {
    /// The backlog record for this item.
    func encoded() -> [UInt8]
    /// The item from a backlog record; `nil` for a record this version cannot read.
    static func decode(_ bytes: [UInt8]) -> Self?
}

/// One message handed out by an ``Outbox``, with its backlog sequence number.
struct OutboxEntry<Item: OutboxItem>: Sendable {
    var sequence: UInt64
    var item: Item
}

/// The queue of one bridge direction: BridgeCore's ``DeliveryBacklog`` (bounded by count and
/// bytes with the configured overflow policy, in memory or spooled to disk with `persist = true`)
/// plus what the daemon needs around it: a lock, and an async wait for the one consumer.
///
/// A message stays in the backlog until the far side accepted it (``acknowledge(_:)``), so what
/// is in flight at a crash is delivered again after the restart (at-least-once, docs/contract.md §5.6).
///
/// When the spool's disk fails (full, I/O error), the backlog keeps new messages in memory
/// (docs/contract.md §7.6); ``sync()`` (about once a second) tries to move them back to the spool
/// and logs the degraded spool once, then at most once a minute with the count held in memory
/// only, and once when it resumes.
final class Outbox<Item: OutboxItem>: Sendable {
    private struct State: ~Copyable {
        var backlog: DeliveryBacklog
        var spool: Spool?
        /// The highest sequence handed to the consumer.
        var handedOut: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
        /// Tasks waiting for the backlog to empty (``waitUntilEmpty()``), by ticket.
        var emptyWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextTicket: UInt64 = 0
        /// When to log the degraded spool.
        var degradedLog = SpoolDegradedLog<ContinuousClock.Instant>()
        /// The producer waiting in ``waitForRoom(messages:bytes:)``: the room it needs, by ticket.
        var roomWaiter: (ticket: UInt64, messages: Int, bytes: Int, continuation: CheckedContinuation<Void, Never>)?
        /// Items appended by this process and not handed out yet, oldest first, with their
        /// sequences: ``next(max:)`` takes them as they are instead of decoding their records
        /// again. At most ``freshLimit`` items and ``freshByteLimit`` bytes of their records: under a
        /// backlog the records are decoded (and the backlog is not held twice).
        var fresh: Deque<(entry: OutboxEntry<Item>, bytes: Int)> = []
        /// The records' sizes of the items in ``fresh``, added up.
        var freshBytes = 0

        /// Remembers an appended item whose record is `bytes` long (when there is room) for the hand-out.
        mutating func appended(_ item: Item, bytes: Int, _ admission: BacklogAdmission) {
            guard fresh.count < Outbox.freshLimit, freshBytes + bytes <= Outbox.freshByteLimit else { return }
            switch admission {
            case .stored(let sequence), .storedDroppingOldest(let sequence, _):
                fresh.append((OutboxEntry(sequence: sequence, item: item), bytes))
                freshBytes += bytes
            case .droppedNewest, .droppedOversize:
                break
            }
        }

        /// The item stored under `sequence`, if it was appended by this process and remembered
        /// (older remembered items, dropped by the overflow policy meanwhile, are forgotten).
        mutating func freshItem(_ sequence: UInt64) -> Item? {
            while let first = fresh.first, first.entry.sequence < sequence { freshBytes -= fresh.removeFirst().bytes }
            guard let first = fresh.first, first.entry.sequence == sequence else { return nil }
            freshBytes -= first.bytes
            return fresh.removeFirst().entry.item
        }

        /// The producer to wake when the room it waits for is there now (taken out of the state).
        mutating func takeRoomWaiterIfRoom() -> CheckedContinuation<Void, Never>? {
            guard let waiter = roomWaiter, closed || backlog.hasRoom(messages: waiter.messages, bytes: waiter.bytes) else { return nil }
            roomWaiter = nil
            return waiter.continuation
        }

        /// The waiters to wake when the backlog is empty now (taken out of the state).
        mutating func takeEmptyWaitersIfDrained() -> [CheckedContinuation<Void, Never>] {
            guard !emptyWaiters.isEmpty, backlog.count == 0 else { return [] }
            defer { emptyWaiters.removeAll() }
            return Array(emptyWaiters.values)
        }
    }

    /// The most items kept for the hand-out besides their records (``State/fresh``).
    static var freshLimit: Int { 1024 }
    /// The most record bytes kept so (1,024 8 KB items were a second 8 MiB of a backlog: BENCHMARKS.md "Memory").
    static var freshByteLimit: Int { 256 * 1024 }

    let name: String
    private let state: Locked<State>
    private let logger: Logger
    private let flushSpool: @Sendable (SpoolSyncPoint) async throws -> Void

    /// - Parameters:
    ///   - spoolDirectory: where to keep the spool; `nil` keeps messages in memory only.
    ///     An existing spool's pending records (from an earlier run) are handed out first.
    ///   - spoolConfiguration: the spool's tuning (tests: a failure injector).
    ///   - flushSpool: forces a sync point to disk; the spools' sync thread unless a test
    ///     needs to hold a sync in progress.
    init(
        name: String, limits: BufferLimits, overflow: BufferOverflowPolicy, spoolDirectory: String?, logger: Logger,
        spoolConfiguration: SpoolConfiguration = .init(),
        flushSpool: @escaping @Sendable (SpoolSyncPoint) async throws -> Void = { try await $0.flushOnSyncThread() }
    ) throws {
        self.name = name
        self.logger = logger
        self.flushSpool = flushSpool
        if let spoolDirectory {
            let spool = try Spool(directory: spoolDirectory, configuration: spoolConfiguration, logger: logger)
            let backlog = DeliveryBacklog(limits: limits, overflow: overflow, spool: spool)
            if backlog.count > 0 {
                logger.notice("spool recovered", metadata: ["outbox": "\(name)", "messages": "\(backlog.count)"])
            }
            state = Locked(State(backlog: backlog, spool: spool))
        } else {
            state = Locked(State(backlog: DeliveryBacklog(limits: limits, overflow: overflow), spool: nil))
        }
    }

    /// The overflow policy in force (``waitForRoom(messages:bytes:)`` is for `backpressure`).
    var overflow: BufferOverflowPolicy { state.withLock { $0.backlog.overflow } }

    /// Changes the overflow policy in place (a reload); a producer waiting for room under
    /// `backpressure` goes on when the new policy drops instead.
    func changeOverflow(to overflow: BufferOverflowPolicy) {
        let producer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.backlog.overflow = overflow
            guard overflow != .backpressure, let waiter = state.roomWaiter else { return nil }
            state.roomWaiter = nil
            return waiter.continuation
        }
        producer?.resume()
    }

    /// Messages not yet acknowledged (waiting or in flight).
    var pending: Int { state.withLock { $0.backlog.count } }
    /// True while the spool cannot write and new messages wait in memory only
    /// (`pusher_mqtt_bridge_spool_degraded`, docs/contract.md §7.6).
    var spoolDegraded: Bool { state.withLock { $0.backlog.isSpoolDegraded } }
    /// The bytes of the records whose items are kept for the hand-out (at most ``freshByteLimit``).
    var rememberedBytes: Int { state.withLock { $0.freshBytes } }
    /// Messages held in memory only while the spool is degraded (a crash loses them).
    var memoryOnly: Int { state.withLock { $0.backlog.isPersistent ? $0.backlog.memoryOnlyCount : 0 } }

    /// Offers a message: store it (on disk when spooled), wake the consumer.
    @discardableResult
    func append(_ item: Item) -> OutboxAdmission {
        var admission = OutboxAdmission()
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            do {
                let record = item.encoded()
                let bytes = record.count
                let stored = try state.backlog.enqueue(record)
                state.appended(item, bytes: bytes, stored)
                admission = OutboxAdmission(stored)
            } catch {
                admission.spoolFailed = true
                logger.error("spool refused the message: not stored", metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        return admission
    }

    /// Offers several messages in order (one lock, one spool write when there is room), wakes
    /// the consumer once. The admissions are in the order of `items`.
    func append(contentsOf items: [Item]) -> [OutboxAdmission] {
        guard items.count > 1 else { return items.map { append($0) } }
        var admissions: [OutboxAdmission] = []
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            do {
                let records = items.map { $0.encoded() }
                let stored = try state.backlog.enqueue(contentsOf: records)
                for ((item, record), admission) in zip(zip(items, records), stored) {
                    state.appended(item, bytes: record.count, admission)
                }
                admissions = stored.map(OutboxAdmission.init)
            } catch {
                logger.error(
                    "spool refused the messages: not stored",
                    metadata: ["outbox": "\(name)", "error": "\(error)", "messages": "\(items.count)"])
                admissions = Array(repeating: OutboxAdmission(dropped: 0, spoolFailed: true), count: items.count)
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        return admissions
    }

    /// Returns once the backlog has room for `messages` more of `bytes` payload bytes in all (an
    /// empty backlog always has room): the `backpressure` policy's producer waits here instead of
    /// dropping (docs/contract.md §7.6), woken by the acknowledgements. It also returns when the
    /// outbox is closed or the task cancelled: a shutdown then stores over the limits rather than
    /// lose what it has. One producer at a time.
    func waitForRoom(messages: Int, bytes: Int) async {
        let ticket = state.withLock { state in
            defer { state.nextTicket += 1 }
            return state.nextTicket
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.closed || Task.isCancelled || state.backlog.hasRoom(messages: messages, bytes: bytes) { return true }
                    state.roomWaiter = (ticket, messages, bytes, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.roomWaiter, waiter.ticket == ticket else { return nil }
                state.roomWaiter = nil
                return waiter.continuation
            }
            waiter?.resume()
        }
    }

    /// Whether `items` would all be stored now without the overflow policy dropping anything, the
    /// spool not degraded and the outbox open (webhooks answer 503 otherwise, docs/contract.md §7.2).
    func canTakeWithoutLoss(_ items: [Item]) -> Bool {
        let bytes = items.reduce(0) { $0 + $1.encoded().count }
        return state.withLock { state in
            !state.closed && !state.backlog.isSpoolDegraded && state.backlog.hasRoom(messages: items.count, bytes: bytes)
        }
    }

    /// Whether a producer waits in ``waitForRoom(messages:bytes:)`` now.
    var isWaitingForRoom: Bool { state.withLock { $0.roomWaiter != nil } }

    /// Up to `max` messages not handed out yet, oldest first, waiting while there are none.
    /// Returns `[]` once the outbox is closed and everything was handed out, or on cancellation.
    func next(max: Int) async -> [OutboxEntry<Item>] {
        while true {
            let taken: [OutboxEntry<Item>]? = state.withLock { state in
                let records: [SpoolRecord]
                do {
                    records = try state.backlog.pending(after: state.handedOut, limit: max)
                } catch {
                    logger.error("spool read failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
                    return state.closed ? [] : nil
                }
                guard let last = records.last else { return state.closed ? [] : nil }
                state.handedOut = last.sequence
                var entries: [OutboxEntry<Item>] = []
                entries.reserveCapacity(records.count)
                for record in records {
                    if let item = state.freshItem(record.sequence) ?? Item.decode(record.payload) {
                        entries.append(OutboxEntry(sequence: record.sequence, item: item))
                    } else {
                        logger.error(
                            "unreadable spool record skipped", metadata: ["outbox": "\(name)", "spool.sequence": "\(record.sequence)"])
                        _ = try? state.backlog.acknowledge(record.sequence)
                    }
                }
                // Unreadable records acknowledged above can empty the backlog.
                for waiter in state.takeEmptyWaitersIfDrained() { waiter.resume() }
                return entries
            }
            if let taken, !taken.isEmpty || isClosed { return taken }
            if Task.isCancelled { return [] }
            if taken != nil { continue }  // every record was unreadable: look again
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        let more = (try? state.backlog.pending(after: state.handedOut, limit: 1).isEmpty == false) ?? false
                        if more || state.closed || state.waiter != nil { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }

    private var isClosed: Bool { state.withLock { $0.closed } }

    /// The far side accepted this message (or it was dead-lettered): forget it, also on disk.
    ///
    /// Returns false when the entry was no longer pending: the overflow policy dropped it while it
    /// was in flight, and it was counted `dropped` then — the caller must not count it again
    /// (docs/contract.md §7.6: every message has exactly one outcome).
    @discardableResult
    func acknowledge(_ entry: OutboxEntry<Item>) -> Bool {
        let (pending, drained, producer) = state.withLock { state in
            var pending = true
            do { pending = try state.backlog.acknowledge(entry.sequence) } catch {
                logger.warning(
                    "spool acknowledgement failed; the message may be delivered again",
                    metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            return (pending, state.takeEmptyWaitersIfDrained(), state.takeRoomWaiterIfRoom())
        }
        for waiter in drained { waiter.resume() }
        producer?.resume()
        return pending
    }

    /// ``acknowledge(_:)`` for several entries under one lock; whether each was still pending, in order.
    func acknowledge(contentsOf entries: [OutboxEntry<Item>]) -> [Bool] {
        guard entries.count > 1 else { return entries.map { acknowledge($0) } }
        let (pending, drained, producer) = state.withLock { state in
            let pending = entries.map { entry in
                do { return try state.backlog.acknowledge(entry.sequence) } catch {
                    logger.warning(
                        "spool acknowledgement failed; the message may be delivered again",
                        metadata: ["outbox": "\(name)", "error": "\(error)"])
                    return true
                }
            }
            return (pending, state.takeEmptyWaitersIfDrained(), state.takeRoomWaiterIfRoom())
        }
        for waiter in drained { waiter.resume() }
        producer?.resume()
        return pending
    }

    /// Returns once every message was acknowledged (the backlog is empty), or when the task is
    /// cancelled: the stop path waits on it, bounded by its grace period, instead of polling.
    func waitUntilEmpty() async {
        let ticket = state.withLock { state in
            defer { state.nextTicket += 1 }
            return state.nextTicket
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.backlog.count == 0 || Task.isCancelled { return true }
                    state.emptyWaiters[ticket] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.emptyWaiters.removeValue(forKey: ticket) }?.resume()
        }
    }

    /// Forces spooled appends to disk (called about once a second; see `SpoolFsyncPolicy`), and
    /// while the spool is degraded first tries to write what waits in memory into it.
    ///
    /// Only the quick part runs under the outbox lock: taking the sync point (which writes the
    /// acknowledgement record into the page cache, in order with the appends). The `fdatasync`
    /// runs on the spools' sync thread without the lock — appends, hand-outs and acknowledgements
    /// go on meanwhile, and what they write belongs to the next sync — and its result is recorded
    /// under the lock again (a failed flush is retried by the next sync, and degrades the spool).
    func sync() async {
        let point: SpoolSyncPoint? = state.withLock { state in
            guard let spool = state.spool else { return nil }
            state.backlog.resumeSpool()
            do {
                let point = try spool.prepareSync()
                guard !point.isEmpty else {
                    spool.finishSync(point, flushed: true)
                    return nil
                }
                return point
            } catch {
                syncFailed(error, backlog: state.backlog)
                return nil
            }
        }
        if let point {
            var failure: (any Error)?
            do { try await flushSpool(point) } catch { failure = error }
            state.withLock { state in
                state.spool?.finishSync(point, flushed: failure == nil)
                if let failure { syncFailed(failure, backlog: state.backlog) }
            }
        }
        reportDegradedSpool(now: .now)
    }

    /// A disk failure degrades the spool (reported by ``reportDegradedSpool(now:)``); anything
    /// else (the sync thread not running) is logged here.
    private func syncFailed(_ error: any Error, backlog: DeliveryBacklog) {
        if let error = error as? SpoolError, error.isDiskFailure {
            backlog.spoolFailed(error)
        } else {
            logger.warning("spool sync failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
        }
    }

    /// Logs the degraded spool: when it degrades, then at most once a minute with the count of
    /// messages in memory only, and when it resumes.
    private func reportDegradedSpool(now: ContinuousClock.Instant) {
        let (line, failure): (SpoolDegradedLog<ContinuousClock.Instant>.Line?, SpoolError?) = state.withLock { state in
            guard state.spool != nil else { return (nil, nil) }
            let line = state.degradedLog.observed(
                degraded: state.backlog.isSpoolDegraded, memoryOnly: state.backlog.memoryOnlyCount, now: now)
            return (line, state.backlog.spoolFailure)
        }
        switch line {
        case .degraded(let memoryOnly):
            logger.error(
                "spool degraded: new messages wait in memory only (lost on a crash) until the disk takes writes again",
                metadata: ["outbox": "\(name)", "memory_only": "\(memoryOnly)", "error": "\(failure.map { "\($0)" } ?? "")"])
        case .stillDegraded(let memoryOnly):
            logger.warning(
                "spool still degraded",
                metadata: ["outbox": "\(name)", "memory_only": "\(memoryOnly)", "error": "\(failure.map { "\($0)" } ?? "")"])
        case .resumed:
            logger.notice("spool resumed: every message is on disk again", metadata: ["outbox": "\(name)"])
        case nil:
            break
        }
    }

    /// No more messages will be appended; `next` returns `[]` once everything was handed out.
    func close() {
        let (waiter, producer) = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return (state.waiter, state.takeRoomWaiterIfRoom())
        }
        waiter?.resume()
        producer?.resume()
    }

    /// Closes the spool file (what is still pending stays on disk for the next start). A last
    /// ``sync()`` first, so the close itself finds nothing to wait for on the disk (unless
    /// something was written in between).
    func closeSpool() async {
        await sync()
        state.withLock { state in
            if state.spool != nil, state.backlog.memoryOnlyCount > 0 {
                logger.error(
                    "spool degraded at close: messages held in memory only are lost",
                    metadata: ["outbox": "\(name)", "messages": "\(state.backlog.memoryOnlyCount)"])
            }
            do { try state.spool?.close() } catch {
                logger.warning("spool close failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            state.spool = nil
        }
    }
}

/// When to log a degraded spool (docs/contract.md §7.6): a line when it degrades, then at most one
/// a minute while it stays degraded, with the count of messages in memory only; a line when it
/// resumes, if its degradation was logged. A spool that degrades again within a minute of its last
/// line waits for the minute: at most one degraded line and one resumed line a minute.
struct SpoolDegradedLog<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// A line to log.
    enum Line: Equatable {
        /// The spool degraded: this many messages are held in memory only.
        case degraded(memoryOnly: Int)
        /// A minute later, still degraded.
        case stillDegraded(memoryOnly: Int)
        /// Writes succeed again; everything is on disk.
        case resumed
    }

    /// The shortest time between two degraded lines.
    static var interval: Duration { .seconds(60) }

    private var lastLine: Instant?
    private var announced = false

    /// The spool's state at `now` (observed about once a second): the line to log, if any.
    mutating func observed(degraded: Bool, memoryOnly: Int, now: Instant) -> Line? {
        guard degraded else {
            guard announced else { return nil }
            announced = false
            return .resumed
        }
        if let lastLine, lastLine.duration(to: now) < Self.interval { return nil }
        lastLine = now
        defer { announced = true }
        return announced ? .stillDegraded(memoryOnly: memoryOnly) : .degraded(memoryOnly: memoryOnly)
    }
}
