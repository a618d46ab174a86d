import BridgeCore
import Foundation
import Glibc
import Locking
import Logging
import PusherChannels
import Testing

@testable import BridgeDaemon
@testable import Durability

/// A full disk degrades the outbox's spool, not its messages (docs/contract.md §7.6).
@Suite(.timeLimit(.minutes(1))) struct OutboxDegradedSpoolTests {
    /// Keeps every log message, for the tests that count lines.
    final class LogLines: Sendable {
        let lines = Locked<[(Logger.Level, String)]>([])
        func messages(_ level: Logger.Level) -> [String] { lines.withLock { $0.filter { $0.0 >= level }.map(\.1) } }
    }

    struct CollectingHandler: LogHandler {
        let sink: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.lines.withLock { $0.append((event.level, "\(event.message)")) }
        }
    }

    static func item(_ n: Int) -> OutgoingPusher {
        OutgoingPusher(
            event: PusherEventPublish(rule: "r", channel: "c", event: "e", data: "m\(n)", via: .http), receivedAtMillis: Int64(n))
    }

    @Test func degradedLogIsOnceAMinute() {
        let t0 = ContinuousClock.now
        var log = SpoolDegradedLog<ContinuousClock.Instant>()
        #expect(log.observed(degraded: false, memoryOnly: 0, now: t0) == nil)
        #expect(log.observed(degraded: true, memoryOnly: 5, now: t0) == .degraded(memoryOnly: 5))
        for second in 1..<60 {
            #expect(log.observed(degraded: true, memoryOnly: 5 + second, now: t0 + .seconds(second)) == nil)
        }
        #expect(log.observed(degraded: true, memoryOnly: 70, now: t0 + .seconds(60)) == .stillDegraded(memoryOnly: 70))
        #expect(log.observed(degraded: true, memoryOnly: 70, now: t0 + .seconds(61)) == nil)
        #expect(log.observed(degraded: false, memoryOnly: 0, now: t0 + .seconds(62)) == .resumed)
        #expect(log.observed(degraded: false, memoryOnly: 0, now: t0 + .seconds(63)) == nil)
        // Degraded again within a minute of the last line: quiet until the minute is up.
        #expect(log.observed(degraded: true, memoryOnly: 1, now: t0 + .seconds(64)) == nil)
        #expect(log.observed(degraded: false, memoryOnly: 0, now: t0 + .seconds(65)) == nil)
        #expect(log.observed(degraded: true, memoryOnly: 2, now: t0 + .seconds(120)) == .degraded(memoryOnly: 2))
    }

    @Test func fullDiskKeepsMessagesInMemoryAndResumes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let limits = BufferLimits(maxMessages: 1_000, maxBytes: 1 << 20)
        let faults = SpoolWriteFaults()
        var configuration = SpoolConfiguration()
        configuration.writeFaults = faults
        let sink = LogLines()
        let logger = Logger(label: "t") { _ in CollectingHandler(sink: sink) }
        let outbox = try Outbox<OutgoingPusher>(
            name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: logger,
            spoolConfiguration: configuration)
        for n in 0..<2 { outbox.append(Self.item(n)) }
        faults.failWrites(errno: ENOSPC)
        for n in 2..<100 { #expect(outbox.append(Self.item(n)) == OutboxAdmission()) }
        #expect(outbox.append(contentsOf: [Self.item(100), Self.item(101)]) == [OutboxAdmission(), OutboxAdmission()])
        #expect(outbox.spoolDegraded)
        #expect(outbox.memoryOnly == 100)
        #expect(outbox.pending == 102)
        let taken = await outbox.next(max: 1_000)
        #expect(taken.map(\.item.event.data) == (0..<102).map { "m\($0)" })
        for entry in taken[0..<50] { #expect(outbox.acknowledge(entry)) }
        #expect(outbox.pending == 52)

        // Still full: one line when it degrades, then quiet (a line a minute).
        for _ in 0..<5 { await outbox.sync() }
        #expect(sink.messages(.warning).count == 1)
        #expect(sink.messages(.warning).first?.hasPrefix("spool degraded") == true)
        #expect(outbox.spoolDegraded)

        faults.heal()
        await outbox.sync()
        #expect(!outbox.spoolDegraded)
        #expect(outbox.memoryOnly == 0)
        #expect(sink.messages(.notice).last?.hasPrefix("spool resumed") == true)
        outbox.append(Self.item(102))
        #expect(outbox.acknowledge(taken[50]))
        await outbox.closeSpool()

        let reopened = try Outbox<OutgoingPusher>(
            name: "t", limits: limits, overflow: .dropOldest, spoolDirectory: directory, logger: Logger(label: "t"))
        #expect(await reopened.next(max: 1_000).map(\.item.event.data) == (51..<103).map { "m\($0)" })
        await reopened.closeSpool()
    }
}
