import BridgeCore
import Durability
import Logging

/// A bridge's dead-letter store at work (docs/contract.md §8.3): keeps every letter the machine
/// reports (`keepDeadLetter`), hands letters to a redrive, forgets them once settled, purges, and
/// keeps the store's metrics. One task owns the store (``run()``, started by `BridgeRuntime.run()`
/// beside its task group and ended after it): every other task sends it commands in order through
/// an `AsyncStream`, so the store needs no lock and its `write(2)`s block no one else. The store
/// cannot be opened (another process holds it, the disk refuses): the bridge runs all the same, its
/// letters only counted, logged and published as before.
final class DeadLetterKeeper: Sendable {
    /// Letters a redrive took: the ones kept, the ids asked for that are not, and how many another
    /// redrive holds.
    struct Taken: Sendable {
        var letters: [StoredDeadLetter] = []
        var missing: [UInt64] = []
        var busy = 0
    }

    private enum Command: Sendable {
        case keep(StoredDeadLetter)
        case take(DeadLetterSelection, CheckedContinuation<Taken, Never>)
        case release([UInt64])
        case remove([UInt64], CheckedContinuation<Int, Never>)
        case purge(DeadLetterSelection, CheckedContinuation<Taken, Never>)
        case sync
        case submitted(UInt64, direction: MessageDirection, sequence: UInt64)
        case recovered(CheckedContinuation<[(id: UInt64, submissions: [DeadLetterStore.Submission])], Never>)
        case rejected([UInt64])
        case wasRejected(UInt64, CheckedContinuation<Bool, Never>)
    }

    let bridge: String
    private let directory: String
    private let maxLetters: Int
    private let metrics: BridgeMetrics
    private let logger: Logger
    private let commands = AsyncStream.makeStream(of: Command.self)

    init(bridge: String, stateDirectory: String, maxLetters: Int, metrics: BridgeMetrics, logger: Logger) {
        self.bridge = bridge
        self.directory = DeadLetterStore.directory(stateDirectory: stateDirectory, bridge: bridge)
        self.maxLetters = maxLetters
        self.metrics = metrics
        self.logger = logger
    }

    /// Keeps a letter the machine reported (in the order they are reported).
    func keep(_ letter: DeadLetter, direction: MessageDirection, atMillis now: Int64) {
        commands.continuation.yield(.keep(Self.stored(letter, direction: direction, bridge: bridge, atMillis: now)))
    }

    /// The kept letters a selection means, oldest first, taken for a redrive (not ones another
    /// redrive holds). Nothing once the bridge has stopped.
    func take(_ selection: DeadLetterSelection) async -> Taken {
        await withCheckedContinuation { continuation in
            if case .terminated = commands.continuation.yield(.take(selection, continuation)) { continuation.resume(returning: Taken()) }
        }
    }

    /// The redrive is done with these letters (removed or not).
    func released(_ ids: [UInt64]) {
        commands.continuation.yield(.release(ids))
    }

    /// Forgets letters (settled by a redrive); returns how many were kept.
    @discardableResult
    func remove(_ ids: [UInt64]) async -> Int {
        await withCheckedContinuation { continuation in
            if case .terminated = commands.continuation.yield(.remove(ids, continuation)) { continuation.resume(returning: 0) }
        }
    }

    /// Purges what a selection means (not letters a redrive holds): `letters` are the ones removed.
    func purge(_ selection: DeadLetterSelection) async -> Taken {
        await withCheckedContinuation { continuation in
            if case .terminated = commands.continuation.yield(.purge(selection, continuation)) { continuation.resume(returning: Taken()) }
        }
    }

    /// A redrive put what letter `id` became in a spool (persist = true): recorded, so that after a
    /// crash the restarted daemon forgets the letter once the spool delivered it instead of leaving
    /// it for a second redrive.
    func submitted(_ id: UInt64, direction: MessageDirection, sequence: UInt64) {
        commands.continuation.yield(.submitted(id, direction: direction, sequence: sequence))
    }

    /// The letters a redrive had put in a spool when the daemon stopped short (they are held as
    /// taken until ``released(_:)``).
    func recovered() async -> [(id: UInt64, submissions: [DeadLetterStore.Submission])] {
        await withCheckedContinuation { continuation in
            if case .terminated = commands.continuation.yield(.recovered(continuation)) { continuation.resume(returning: []) }
        }
    }

    /// The Pusher API refused these MQTT → Pusher outbox entries (they become dead letters): noted
    /// while a redrive runs, so that it counts its own as dead-lettered again, not delivered.
    func rejected(_ sequences: [UInt64]) {
        commands.continuation.yield(.rejected(sequences))
    }

    /// Whether the Pusher API refused the MQTT → Pusher outbox entry `sequence` (asked once, by a redrive).
    func wasRejected(_ sequence: UInt64) async -> Bool {
        await withCheckedContinuation { continuation in
            if case .terminated = commands.continuation.yield(.wasRejected(sequence, continuation)) {
                continuation.resume(returning: false)
            }
        }
    }

    /// Makes what changed since the last sync durable (housekeeping, about every second).
    func sync() {
        commands.continuation.yield(.sync)
    }

    /// No more commands: ``run()`` carries out those sent, makes the store durable and releases it.
    func finish() { commands.continuation.finish() }

    /// The store's owner: opens it, carries out the commands in order until ``finish()``, then
    /// syncs and closes it (which releases its lock).
    func run() async {
        var (store, locked) = open(reportingFailure: true)
        // Letters a redrive cut short had in a spool: held until the runtime's resumeRedrives() is done with them.
        var redriving = Set(store?.submitted.map(\.id) ?? [])
        var written = false
        var rejected: Set<UInt64> = []
        for await command in commands.stream {
            if store == nil, locked {
                // Held by another process when the bridge started (a `dead-letters purge` from the
                // command line for a moment): tried again at each command, housekeeping's sync
                // among them, so within about a second.
                (store, locked) = open(reportingFailure: false)
                if store != nil { logger.info("dead-letter store available again", metadata: ["directory": "\(directory)"]) }
            }
            switch command {
            case .rejected(let sequences):
                if !redriving.isEmpty { rejected.formUnion(sequences) }
            case .wasRejected(let sequence, let continuation):
                continuation.resume(returning: rejected.remove(sequence) != nil)
            case .submitted(let id, let direction, let sequence):
                written = true
                attempt("dead-letter store: redrive not recorded") {
                    try store?.markSubmitted(id, direction: direction == .pusherToMQTT ? 0 : 1, sequence: sequence)
                }
            case .recovered(let continuation):
                continuation.resume(returning: store?.submitted ?? [])
            case .sync:
                guard let store, written else { continue }
                written = false
                do { try await store.synchronizeOnSyncThread() } catch {
                    metrics.errors(bridge: bridge, kind: "dead_letters").increment()
                    logger.error("dead-letter store: sync failed", metadata: ["error": "\(error)"])
                }
            case .keep(let letter):
                written = true
                guard let store else { continue }
                let before = store.evicted
                attempt("dead letter not kept: the store refused it") { try store.append(letter) }
                if store.evicted > before { metrics.deadLettersEvicted(bridge: bridge).increment(by: store.evicted - before) }
            case .take(let selection, let continuation):
                guard let store else {
                    continuation.resume(returning: Taken())
                    continue
                }
                let (letters, missing) = Self.select(selection, bridge: bridge, in: store)
                let free = letters.filter { !redriving.contains($0.id) }
                redriving.formUnion(free.map(\.id))
                continuation.resume(returning: Taken(letters: free, missing: missing, busy: letters.count - free.count))
            case .release(let ids):
                redriving.subtract(ids)
                if redriving.isEmpty { rejected = [] }
            case .remove(let ids, let continuation):
                written = true
                let removed = store.flatMap { store in attempt("dead letters not removed: the store refused") { try store.remove(ids) } }
                continuation.resume(returning: removed?.count ?? 0)
            case .purge(let selection, let continuation):
                guard let store else {
                    continuation.resume(returning: Taken())
                    continue
                }
                let (letters, missing) = Self.select(selection, bridge: bridge, in: store)
                let free = letters.filter { !redriving.contains($0.id) }
                written = true
                let removed = attempt("dead letters not purged: the store refused") { try store.remove(free.map(\.id)) } ?? []
                let gone = Set(removed)
                continuation.resume(
                    returning: Taken(letters: free.filter { gone.contains($0.id) }, missing: missing, busy: letters.count - free.count))
            }
            if let store { metrics.deadLettersStored(bridge: bridge).record(store.count) }
        }
        attempt("dead-letter store: final sync failed") { try store?.synchronize() }
    }

    /// The store, or nil (`locked`: another process holds it, worth trying again).
    private func open(reportingFailure: Bool) -> (DeadLetterStore?, locked: Bool) {
        do {
            let opened = try DeadLetterStore(directory: directory, maxLetters: maxLetters)
            if opened.recovery.total > 0 {
                metrics.deadLettersDamaged(bridge: bridge).increment(by: opened.recovery.total)
                logger.warning(
                    "dead-letter store: damaged records skipped",
                    metadata: [
                        "directory": "\(directory)", "torn": "\(opened.recovery.tornRecords)",
                        "skipped": "\(opened.recovery.skippedRecords)",
                    ])
            }
            if opened.evicted > 0 { metrics.deadLettersEvicted(bridge: bridge).increment(by: opened.evicted) }
            metrics.deadLettersStored(bridge: bridge).record(opened.count)
            return (opened, false)
        } catch {
            let locked = (error as? SpoolError)?.isLocked ?? false
            if reportingFailure {
                metrics.errors(bridge: bridge, kind: "dead_letters").increment()
                let until = locked ? " until the other process lets it go" : ""
                logger.error(
                    "dead-letter store unavailable: dead letters are counted and logged but not kept\(until)",
                    metadata: ["directory": "\(directory)", "error": "\(error)"])
            }
            return (nil, locked)
        }
    }

    /// Runs a store call; a failure is counted and logged, and gives nil.
    @discardableResult
    private func attempt<T>(_ what: String, _ body: () throws -> T) -> T? {
        do { return try body() } catch {
            metrics.errors(bridge: bridge, kind: "dead_letters").increment()
            logger.error("\(what)", metadata: ["error": "\(error)"])
            return nil
        }
    }

    // MARK: Pure helpers

    static func select(
        _ selection: DeadLetterSelection, bridge: String, in store: DeadLetterStore
    ) -> (letters: [StoredDeadLetter], missing: [UInt64]) {
        switch selection {
        case .ids(let ids):
            var found: [StoredDeadLetter] = []
            var missing: [UInt64] = []
            for id in ids where id.bridge == bridge {
                if let letter = try? store.letter(id.number) { found.append(letter) } else { missing.append(id.number) }
            }
            return (found.sorted { $0.id < $1.id }, missing)
        case .all(let only):
            guard only == nil || only == bridge else { return ([], []) }
            return ((try? store.letters()) ?? [], [])
        case .code(let code, let only):
            guard only == nil || only == bridge else { return ([], []) }
            return (((try? store.letters()) ?? []).filter { $0.code == code }, [])
        }
    }

    /// The store's form of a letter: an MQTT message, a Pusher event, or (a letter of the MQTT →
    /// Pusher side about a Pusher event: the API refused it) the event that went out.
    static func stored(_ letter: DeadLetter, direction: MessageDirection, bridge: String, atMillis now: Int64) -> StoredDeadLetter {
        let message: StoredDeadLetter.Message
        switch letter.source {
        case .mqtt(let topic): message = .mqtt(topic: topic, qos: letter.qos, retain: letter.retain)
        case .pusher(let channel, let event):
            message =
                direction == .pusherToMQTT
                ? .pusher(channel: channel, event: event, userID: letter.userID) : .toPusher(channel: channel, event: event)
        }
        return StoredDeadLetter(
            bridge: bridge, rule: letter.rule, code: letter.reason.code, reason: letter.reason.description, timeMillis: now,
            message: message, payload: letter.payload)
    }

    /// What the machine routes again for a kept letter.
    static func redriven(_ letter: StoredDeadLetter) -> RedrivenMessage {
        switch letter.message {
        case .mqtt(let topic, let qos, let retain): .mqtt(topic: topic, payload: letter.payload, qos: qos, retain: retain)
        case .pusher(let channel, let event, let userID):
            .pusher(channel: channel, event: event, data: String(decoding: letter.payload, as: UTF8.self), userID: userID)
        case .toPusher(let channel, let event):
            .toPusher(rule: letter.rule, channel: channel, event: event, data: String(decoding: letter.payload, as: UTF8.self))
        }
    }
}
