import BridgeCore
import Logging
import Synchronization

/// Something an ``Outbox`` can hold and spool: it knows its size and its bytes on disk.
protocol OutboxItem: Sendable {
    /// Bytes counted against `[bridge.buffer] max_bytes`.
    var byteCount: Int { get }
    /// The spool record for this item.
    func encoded() -> [UInt8]
    /// The item from a spool record; `nil` for a record this version cannot read.
    static func decode(_ bytes: [UInt8]) -> Self?
}

/// One message waiting in an ``Outbox``, with its spool sequence number (0 when not spooled).
struct OutboxEntry<Item: OutboxItem>: Sendable, BufferableMessage {
    var sequence: UInt64
    var item: Item
    var bufferedByteCount: Int { item.byteCount }
}

/// What happened to a message offered to an ``Outbox``.
struct OutboxAdmission: Sendable, Equatable {
    /// Messages dropped by the overflow policy (the offered one included, for drop-newest).
    var dropped = 0
    /// The spool could not take the message (disk full, I/O error): it is only in memory.
    var spoolFailed = false
}

/// The queue of one bridge direction (DESIGN §4 `[bridge.buffer]`): bounded by count and bytes
/// with the configured overflow policy (every drop counted), optionally backed by an on-disk
/// ``Spool`` so a restart loses nothing that was buffered, and awaited by one consumer.
///
/// A message is appended to the spool before it is buffered and acknowledged in the spool only
/// after the far side accepted it, so whatever is in flight at a crash is delivered again after
/// the restart (at-least-once, DESIGN §5.6). Dropped messages are acknowledged at once.
final class Outbox<Item: OutboxItem>: Sendable {
    private struct State: ~Copyable {
        var buffer: MessageBuffer<OutboxEntry<Item>>
        var spool: Spool?
        /// Entries handed out by `next` and not yet acknowledged or returned.
        var inFlight = 0
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
        var appendsSinceSync = 0
    }

    let name: String
    private let state: Mutex<State>
    private let logger: Logger

    /// - Parameter spoolDirectory: where to keep the spool; `nil` keeps messages in memory only.
    /// - Returns: the outbox, with the spool's pending records (from an earlier run) buffered first.
    init(name: String, limits: MessageBuffer<OutboxEntry<Item>>.Limits, overflow: BufferOverflowPolicy, spoolDirectory: String?, logger: Logger) throws {
        self.name = name
        self.logger = logger
        var buffer = MessageBuffer<OutboxEntry<Item>>(limits: limits, overflow: overflow)
        var spool: Spool?
        if let spoolDirectory {
            let opened = try Spool(directory: spoolDirectory, logger: logger)
            var recovered = 0
            var unreadable = 0
            var after: UInt64 = 0
            while true {
                let records = try opened.read(after: after, limit: 1024)
                guard let last = records.last else { break }
                after = last.sequence
                for record in records {
                    guard let item = Item.decode(record.payload) else {
                        unreadable += 1
                        _ = try? opened.acknowledge(record.sequence)
                        continue
                    }
                    if case .droppedNewest = buffer.append(OutboxEntry(sequence: record.sequence, item: item)) {
                        _ = try? opened.acknowledge(record.sequence)
                    }
                    recovered += 1
                }
            }
            if recovered > 0 || unreadable > 0 {
                logger.notice("spool recovered", metadata: ["outbox": "\(name)", "messages": "\(recovered)", "unreadable": "\(unreadable)"])
            }
            spool = opened
        }
        state = Mutex(State(buffer: buffer, spool: spool))
    }

    /// Messages buffered and not yet handed out.
    var count: Int { state.withLock { $0.buffer.count } }

    /// Messages buffered or handed out and not yet acknowledged.
    var pending: Int { state.withLock { $0.buffer.count + $0.inFlight } }

    /// Running totals of the buffer (drops by reason).
    var counters: MessageBuffer<OutboxEntry<Item>>.Counters { state.withLock { $0.buffer.counters } }

    /// Offers a message: spool it, buffer it, wake the consumer.
    @discardableResult
    func append(_ item: Item) -> OutboxAdmission {
        var admission = OutboxAdmission()
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            var sequence: UInt64 = 0
            if let spool = state.spool {
                do {
                    sequence = try spool.append(item.encoded())
                    state.appendsSinceSync += 1
                } catch {
                    admission.spoolFailed = true
                }
            }
            switch state.buffer.append(OutboxEntry(sequence: sequence, item: item)) {
            case .stored:
                break
            case .storedDroppingOldest(let dropped):
                admission.dropped = dropped.count
                for entry in dropped where entry.sequence != 0 { _ = try? state.spool?.acknowledge(entry.sequence) }
            case .droppedNewest(let entry), .droppedOversize(let entry):
                admission.dropped = 1
                if entry.sequence != 0 { _ = try? state.spool?.acknowledge(entry.sequence) }
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        return admission
    }

    /// Up to `max` messages, oldest first, waiting while there are none. Returns `[]` once the
    /// outbox is closed and empty, or when the task is cancelled.
    func next(max: Int) async -> [OutboxEntry<Item>] {
        while true {
            let taken: [OutboxEntry<Item>]? = state.withLock { state in
                if state.buffer.isEmpty { return state.closed ? [] : nil }
                var out: [OutboxEntry<Item>] = []
                while out.count < max, let entry = state.buffer.removeFirst() { out.append(entry) }
                state.inFlight += out.count
                return out
            }
            if let taken { return taken }
            if Task.isCancelled { return [] }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state in
                        if !state.buffer.isEmpty || state.closed || state.waiter != nil { return true }
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

    /// The far side accepted this message: forget it (also on disk).
    func acknowledge(_ entry: OutboxEntry<Item>) {
        state.withLock { state in
            state.inFlight -= 1
            if entry.sequence != 0 { _ = try? state.spool?.acknowledge(entry.sequence) }
        }
    }

    /// The message will never be delivered (dead-lettered): forget it like an accepted one.
    func discard(_ entry: OutboxEntry<Item>) { acknowledge(entry) }

    /// A message handed out could not be delivered now; it stays spooled (delivered after a restart)
    /// and is no longer counted in flight. Callers that retry keep the entry themselves.
    func abandon(_ entry: OutboxEntry<Item>) {
        state.withLock { $0.inFlight -= 1 }
    }

    /// Forces spooled appends to disk (called about once a second; see `SpoolFsyncPolicy`).
    func sync() {
        state.withLock { state in
            guard state.appendsSinceSync > 0, let spool = state.spool else { return }
            state.appendsSinceSync = 0
            do { try spool.sync() } catch { logger.warning("spool sync failed", metadata: ["outbox": "\(name)", "error": "\(error)"]) }
        }
    }

    /// No more messages will be appended; `next` returns `[]` once the buffer is empty.
    func close() {
        let waiter = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Closes the spool file (what is still pending stays on disk for the next start).
    func closeSpool() {
        state.withLock { state in
            do { try state.spool?.close() } catch { logger.warning("spool close failed", metadata: ["outbox": "\(name)", "error": "\(error)"]) }
            state.spool = nil
        }
    }
}
