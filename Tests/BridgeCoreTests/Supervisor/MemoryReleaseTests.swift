import Testing

@testable import BridgeCore

/// ``MemoryRelease``: the allocator's free pages go back once after a large backlog drained, never
/// for small ones, at most once per interval (a manual clock: instants built from one `t0`).
@Suite("MemoryRelease: free pages back after a drained backlog, rate-limited")
struct MemoryReleaseTests {
    let t0 = ContinuousClock.now
    let big = MemoryRelease.threshold

    @Test func aLargeBacklogReleasesOnceWhenItHasDrainedNotBefore() {
        var memory = MemoryRelease()
        #expect(!memory.measured(backlog: big * 3, now: t0), "still waiting: nothing to give back yet")
        #expect(!memory.measured(backlog: MemoryRelease.drained + 1, now: t0 + .seconds(1)), "not drained")
        #expect(memory.measured(backlog: MemoryRelease.drained, now: t0 + .seconds(2)), "drained (what steady traffic keeps in flight) after a peak of \(big * 3)")
        #expect(!memory.measured(backlog: 0, now: t0 + .seconds(30)), "once per backlog, not every idle second")
        #expect(memory.peakSinceRelease == 0)
    }

    @Test func smallBacklogsNeverRelease() {
        var memory = MemoryRelease()
        for second in 0..<100 {
            let backlog = second.isMultiple(of: 2) ? big - 1 : 0
            #expect(!memory.measured(backlog: backlog, now: t0 + .seconds(second)))
        }
    }

    @Test func aSecondBacklogWithinTheIntervalIsReleasedWhenTheIntervalHasPassed() {
        var memory = MemoryRelease()
        #expect(!memory.measured(backlog: big, now: t0))
        #expect(memory.measured(backlog: 0, now: t0 + .seconds(1)))
        #expect(!memory.measured(backlog: big, now: t0 + .seconds(2)))
        #expect(!memory.measured(backlog: 0, now: t0 + .seconds(3)), "10 s have not passed since the last release")
        #expect(!memory.measured(backlog: 0, now: t0 + .seconds(10)))
        #expect(memory.measured(backlog: 0, now: t0 + .seconds(11)), "the interval has passed and it is still drained")
        #expect(!memory.measured(backlog: 0, now: t0 + .seconds(40)))
    }

    @Test func theSupervisorAsksAfterItsBacklogDrained() throws {
        var supervisor = try BridgeSupervisorTests.supervisor()
        #expect(!supervisor.backlogMeasured(big, now: t0))
        #expect(supervisor.backlogMeasured(0, now: t0 + .seconds(1)))
        #expect(!supervisor.backlogMeasured(0, now: t0 + .seconds(2)))
    }
}
