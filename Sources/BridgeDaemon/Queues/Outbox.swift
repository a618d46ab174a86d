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
    struct State: ~Copyable {
        var backlog: DeliveryBacklog
        var spool: Spool?
        /// The highest sequence handed to the consumer.
        var handedOut: UInt64 = 0
        /// The consumer waiting in ``next(max:)`` for a message.
        var consumers = WaiterQueue<Void>()
        var closed = false
        /// Set by ``closeSpool()``: the bridge has stopped; nothing pending will be delivered by this run.
        var released = false
        /// Tasks waiting for the backlog to empty (``waitUntilEmpty()``).
        var drainWaiters = WaiterQueue<Void>()
        /// Tasks waiting for a message of theirs to be settled (``waitUntilSettled(through:deadline:)``).
        var settleWaiters = WaiterQueue<Void>()
        /// When to log the degraded spool.
        var degradedLog = SpoolDegradedLog<ContinuousClock.Instant>()
        /// The producer waiting in ``waitForRoom(messages:bytes:)`` (one at a time), and the room it needs.
        var producers = WaiterQueue<Void>()
        var roomWanted = (messages: 0, bytes: 0)
        /// Items appended by this process and not handed out yet, oldest first, with their
        /// sequences: ``next(max:)`` takes them as they are instead of decoding their records
        /// again. At most ``freshLimit`` items and ``freshByteLimit`` bytes of their records: under a
        /// backlog the records are decoded (and the backlog is not held twice).
        var fresh: Deque<(entry: OutboxEntry<Item>, bytes: Int)> = []
        /// The records' sizes of the items in ``fresh``, added up.
        var freshBytes = 0
        /// The most items ``fresh`` held since its storage was last released.
        var freshPeak = 0

        /// Remembers an appended item whose record is `bytes` long (when there is room) for the hand-out.
        mutating func appended(_ item: Item, bytes: Int, _ admission: BacklogAdmission) {
            guard fresh.count < Outbox.freshLimit, freshBytes + bytes <= Outbox.freshByteLimit else { return }
            switch admission {
            case .stored(let sequence), .storedDroppingOldest(let sequence, _):
                fresh.append((OutboxEntry(sequence: sequence, item: item), bytes))
                freshBytes += bytes
                freshPeak = max(freshPeak, fresh.count)
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
            defer { releaseFreshStorageIfDrained() }
            return fresh.removeFirst().entry.item
        }

        /// Gives the storage of ``fresh`` back once it is empty after a burst (a deque keeps the
        /// capacity of its largest size otherwise).
        mutating func releaseFreshStorageIfDrained() {
            guard fresh.isEmpty, freshPeak > Outbox.freshRetained else { return }
            fresh = []
            freshPeak = 0
        }

        /// The producer to wake when the room it waits for is there now (taken out of the state).
        mutating func takeRoomWaiterIfRoom() -> WakeUp<Void> {
            guard !producers.isEmpty, closed || backlog.hasRoom(messages: roomWanted.messages, bytes: roomWanted.bytes) else {
                return WakeUp()
            }
            return producers.resumeAll(returning: ())
        }

        /// The waiters to wake when the backlog is empty now (taken out of the state).
        mutating func takeEmptyWaitersIfDrained() -> WakeUp<Void> {
            guard !drainWaiters.isEmpty, backlog.count == 0 else { return WakeUp() }
            return drainWaiters.resumeAll(returning: ())
        }

        /// The tasks waiting for messages to be settled: each looks again after an acknowledgement.
        mutating func takeSettleWaiters() -> WakeUp<Void> {
            settleWaiters.isEmpty ? WakeUp() : settleWaiters.resumeAll(returning: ())
        }
    }

    /// The most items kept for the hand-out besides their records (``State/fresh``).
    static var freshLimit: Int { 1024 }
    /// The items whose storage ``State/fresh`` keeps when it empties; a larger burst's is released.
    static var freshRetained: Int { 64 }
    /// The most record bytes kept so (1,024 8 KB items were a second 8 MiB of a backlog: docs/history/benchmarks.md, "Memory").
    static var freshByteLimit: Int { 256 * 1024 }

    let name: String
    let state: Locked<State>
    let logger: Logger
    let flushSpool: @Sendable (SpoolSyncPoint) async throws -> Void

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
        let spool = try spoolDirectory.map { try Spool(directory: $0, configuration: spoolConfiguration, logger: logger) }
        let backlog =
            spool.map { DeliveryBacklog(limits: limits, overflow: overflow, spool: $0) }
            ?? DeliveryBacklog(limits: limits, overflow: overflow)
        if spool != nil, backlog.count > 0 {
            logger.notice("spool recovered", metadata: ["outbox": "\(name)", "messages": "\(backlog.count)"])
        }
        state = Locked(State(backlog: backlog, spool: spool))
    }

    /// The overflow policy in force (``waitForRoom(messages:bytes:)`` is for `backpressure`).
    var overflow: BufferOverflowPolicy { state.withLock { $0.backlog.overflow } }

    /// Changes the overflow policy in place (a reload); a producer waiting for room under
    /// `backpressure` goes on when the new policy drops instead.
    func changeOverflow(to overflow: BufferOverflowPolicy) {
        state.withLock { state in
            state.backlog.overflow = overflow
            return overflow != .backpressure ? state.producers.resumeAll(returning: ()) : WakeUp()
        }.resume()
    }

    /// Messages not yet acknowledged (waiting or in flight).
    var pending: Int { state.withLock { $0.backlog.count } }
    /// What is pending, in messages and in bytes (the housekeeping's measure for ``MemoryRelease``).
    var pendingSize: (messages: Int, bytes: Int) { state.withLock { ($0.backlog.count, $0.backlog.byteCount) } }
    /// True while the spool cannot write and new messages wait in memory only
    /// (`pusher_mqtt_bridge_spool_degraded`, docs/contract.md §7.6).
    var spoolDegraded: Bool { state.withLock { $0.backlog.isSpoolDegraded } }
    /// The bytes of the records whose items are kept for the hand-out (at most ``freshByteLimit``).
    var rememberedBytes: Int { state.withLock { $0.freshBytes } }
    /// The most items the hand-out's memory held since its storage was last released (tests: a
    /// drained burst gives its storage back).
    var rememberedPeak: Int { state.withLock { $0.freshPeak } }
    /// Messages held in memory only while the spool is degraded (a crash loses them).
    var memoryOnly: Int { state.withLock { $0.backlog.isPersistent ? $0.backlog.memoryOnlyCount : 0 } }

    /// Offers a message: store it (on disk when spooled), wake the consumer.
    @discardableResult
    func append(_ item: Item) -> OutboxAdmission {
        var admission = OutboxAdmission()
        let consumer = state.withLock { state in
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
            return state.consumers.resumeAll(returning: ())
        }
        consumer.resume()
        return admission
    }

    /// Offers several messages in order (one lock, one spool write when there is room), wakes
    /// the consumer once. The admissions are in the order of `items`.
    func append(contentsOf items: [Item]) -> [OutboxAdmission] {
        guard items.count > 1 else { return items.map { append($0) } }
        var admissions: [OutboxAdmission] = []
        let consumer = state.withLock { state in
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
            return state.consumers.resumeAll(returning: ())
        }
        consumer.resume()
        return admissions
    }

    /// Returns once the backlog has room for `messages` more of `bytes` payload bytes in all (an
    /// empty backlog always has room): the `backpressure` policy's producer waits here instead of
    /// dropping (docs/contract.md §7.6), woken by the acknowledgements. It also returns when the
    /// outbox is closed or the task cancelled: a shutdown then stores over the limits rather than
    /// lose what it has. One producer at a time.
    func waitForRoom(messages: Int, bytes: Int) async {
        await state.wait(
            in: { $1(&$0.producers) },
            until: { state in
                if state.closed || state.backlog.hasRoom(messages: messages, bytes: bytes) { return () }
                state.roomWanted = (messages, bytes)
                return nil
            }, ifCancelled: { _ in })
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
    var isWaitingForRoom: Bool { state.withLock { !$0.producers.isEmpty } }

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
                // Unreadable records acknowledged above can empty the backlog (resumed under the
                // lock: rare, and the drain waiters take no lock of ours when they go on).
                state.takeEmptyWaitersIfDrained().resume()
                return entries
            }
            if let taken, !taken.isEmpty || isClosed { return taken }
            if Task.isCancelled { return [] }
            if taken != nil { continue }  // every record was unreadable: look again
            await state.wait(
                in: { $1(&$0.consumers) },
                until: { state in
                    let more = (try? state.backlog.pending(after: state.handedOut, limit: 1).isEmpty == false) ?? false
                    return more || state.closed ? () : nil
                }, ifCancelled: { _ in })
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
        let (pending, drained, producer, settled) = state.withLock { state in
            var pending = true
            do { pending = try state.backlog.acknowledge(entry.sequence) } catch {
                logger.warning(
                    "spool acknowledgement failed; the message may be delivered again",
                    metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            return (pending, state.takeEmptyWaitersIfDrained(), state.takeRoomWaiterIfRoom(), state.takeSettleWaiters())
        }
        drained.resume()
        producer.resume()
        settled.resume()
        return pending
    }

    /// ``acknowledge(_:)`` for several entries under one lock; whether each was still pending, in order.
    func acknowledge(contentsOf entries: [OutboxEntry<Item>]) -> [Bool] {
        guard entries.count > 1 else { return entries.map { acknowledge($0) } }
        let (pending, drained, producer, settled) = state.withLock { state in
            let pending = entries.map { entry in
                do { return try state.backlog.acknowledge(entry.sequence) } catch {
                    logger.warning(
                        "spool acknowledgement failed; the message may be delivered again",
                        metadata: ["outbox": "\(name)", "error": "\(error)"])
                    return true
                }
            }
            return (pending, state.takeEmptyWaitersIfDrained(), state.takeRoomWaiterIfRoom(), state.takeSettleWaiters())
        }
        drained.resume()
        producer.resume()
        settled.resume()
        return pending
    }

    /// Returns once every message was acknowledged (the backlog is empty), or when the task is
    /// cancelled: the stop path waits on it, bounded by its grace period, instead of polling.
    func waitUntilEmpty() async {
        await state.wait(in: { $1(&$0.drainWaiters) }, until: { $0.backlog.count == 0 ? () : nil }, ifCancelled: { _ in })
    }

    /// Returns true once no message up to `sequence` is pending any more (delivered, dead-lettered
    /// or dropped), false at `deadline` or once the bridge has stopped (``closeSpool()``; a close
    /// alone does not end the wait: the drain still delivers): the dead-letter redrive waits here
    /// before it forgets a letter (docs/contract.md §8.3). Woken by acknowledgements.
    func waitUntilSettled(through sequence: UInt64, deadline: ContinuousClock.Instant) async -> Bool {
        func settled(_ state: inout State) -> Bool? {
            if (state.backlog.oldestPendingSequence.map { $0 > sequence }) ?? true { return true }
            return state.released || ContinuousClock.now >= deadline ? false : nil
        }
        while true {
            if let outcome = state.withLock({ settled(&$0) }) { return outcome }
            if Task.isCancelled { return false }
            await state.wait(
                in: { $1(&$0.settleWaiters) }, deadline: deadline, until: { settled(&$0) == nil ? nil : () },
                ifTimedOut: { _ in }, ifCancelled: { _ in })
        }
    }

    /// No more messages will be appended; `next` returns `[]` once everything was handed out.
    func close() {
        let (consumer, producer, settled) = state.withLock { state in
            state.closed = true
            return (state.consumers.resumeAll(returning: ()), state.takeRoomWaiterIfRoom(), state.takeSettleWaiters())
        }
        consumer.resume()
        producer.resume()
        settled.resume()
    }
}
