import Logging
import Testing

@testable import BridgeDaemon

/// The real calls into glibc's allocator (what ``MemoryRelease`` decides is tested in BridgeCore).
@Suite("FreeMemory: glibc's malloc_trim and arena limit, called for real")
struct FreeMemoryTests {
    /// A backlog's worth of small blocks freed, then handed back: runs, and the heap still works.
    @Test func givingBackAfterFreeingABacklogKeepsTheHeapUsable() {
        var blocks: [[UInt8]] = (0..<20_000).map { [UInt8](repeating: UInt8($0 & 0xFF), count: 300) }
        blocks.removeAll()
        FreeMemory.giveBack(logger: Logger(label: "test"))
        let after = [UInt8](repeating: 7, count: 1 << 20)
        #expect(after.count == 1 << 20 && after.allSatisfy { $0 == 7 })
    }

    @Test func limitingArenasAfterThreadsExistIsHarmless() {
        FreeMemory.limitArenas()
        FreeMemory.giveBack(logger: Logger(label: "test"))
    }
}
