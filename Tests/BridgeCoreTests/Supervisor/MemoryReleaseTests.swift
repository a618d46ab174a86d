import Testing

@testable import BridgeCore

/// ``MemoryRelease``: the allocator's free pages go back once after a large backlog drained, never
/// for small ones, at most once per interval (a manual clock: instants built from one `t0`).
@Suite("MemoryRelease: free pages back after a drained backlog, rate-limited")
struct MemoryReleaseTests {
    let t0 = ContinuousClock.now
    let big = MemoryRelease.threshold
    let drained = MemoryRelease.drained

    @Test func aLargeBacklogReleasesOnceWhenItHasDrainedNotBefore() {
        var memory = MemoryRelease()
        func measured(_ backlog: Int, atSecond second: Int) -> Bool {
            memory.measured(backlog: backlog, now: t0 + .seconds(second))
        }
        #expect(!measured(big * 3, atSecond: 0), "still waiting: nothing to give back yet")
        #expect(!measured(drained + 1, atSecond: 1), "not drained")
        #expect(measured(drained, atSecond: 2), "drained (what steady traffic keeps in flight) after a peak of \(big * 3)")
        #expect(!measured(0, atSecond: 30), "once per backlog, not every idle second")
        #expect(memory.peakSinceRelease == 0)
    }

    @Test func smallBacklogsNeverRelease() {
        var memory = MemoryRelease()
        for second in 0..<100 {
            let backlog = second.isMultiple(of: 2) ? big - 1 : 0
            let released = memory.measured(backlog: backlog, now: t0 + .seconds(second))
            #expect(!released, "second \(second): a backlog of \(backlog)")
        }
    }

    @Test func aSecondBacklogWithinTheIntervalIsReleasedWhenTheIntervalHasPassed() {
        var memory = MemoryRelease()
        func measured(_ backlog: Int, atSecond second: Int) -> Bool {
            memory.measured(backlog: backlog, now: t0 + .seconds(second))
        }
        #expect(!measured(big, atSecond: 0))
        #expect(measured(0, atSecond: 1))
        #expect(!measured(big, atSecond: 2))
        #expect(!measured(0, atSecond: 3), "10 s have not passed since the last release")
        #expect(!measured(0, atSecond: 10))
        #expect(measured(0, atSecond: 11), "the interval has passed and it is still drained")
        #expect(!measured(0, atSecond: 40))
    }

    @Test func fewLargeMessagesCountByTheirBytes() {
        var memory = MemoryRelease()
        func measured(_ backlog: Int, bytes: Int, atSecond second: Int) -> Bool {
            memory.measured(backlog: backlog, bytes: bytes, now: t0 + .seconds(second))
        }
        // 100 messages of 64 KiB: few messages, but 6.25 MiB held.
        #expect(!measured(100, bytes: 100 << 16, atSecond: 0), "not drained: still holding them")
        #expect(measured(0, bytes: 0, atSecond: 1), "drained after holding \(100 << 16) bytes")
        #expect(memory.peakBytesSinceRelease == 0)
        // 100 messages of 8 KiB (800 KiB): small by both measures.
        #expect(!measured(100, bytes: 100 << 13, atSecond: 20))
        #expect(!measured(0, bytes: 0, atSecond: 21))
    }

    @Test func theSupervisorAsksAfterItsBacklogDrained() throws {
        var supervisor = try BridgeSupervisorTests.supervisor()
        func measured(_ backlog: Int, atSecond second: Int) -> Bool {
            supervisor.backlogMeasured(backlog, now: t0 + .seconds(second))
        }
        #expect(!measured(big, atSecond: 0))
        #expect(measured(0, atSecond: 1))
        #expect(!measured(0, atSecond: 2))
    }
}
