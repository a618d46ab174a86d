import CGlibcMalloc
import Logging

/// Hands the allocator's free pages back to the system (``MemoryRelease`` decides when: after a
/// drained backlog). glibc keeps freed memory in its arenas; `malloc_trim(0)` returns every whole
/// free page of every arena (`madvise(MADV_DONTNEED)`), under each arena's own lock, so other threads
/// keep allocating meanwhile. Measured in docs/architecture.md, "Memory after a backlog".
enum FreeMemory {
    static func giveBack(logger: Logger) {
        let before = ContinuousClock.now
        let released = malloc_trim(0) == 1
        logger.debug(
            "free memory handed back after a backlog drained",
            metadata: ["released": "\(released)", "took": "\(ContinuousClock.now - before)"])
    }
}
