import CGlibcMalloc
import Logging

/// The daemon's use of glibc's allocator (docs/architecture.md, "Memory after a backlog").
///
/// - ``limitArenas()``, at the start of the process: at most two malloc arenas. glibc gives each
///   thread that allocates at once with another an arena of its own (up to 8 per core), and memory
///   freed in one arena serves only the threads bound to it, so the peaks of a fault add up arena by
///   arena. The daemon's threads allocate little at a time, and on the 2-core machines it runs on
///   two arenas are as many as can be busy together.
/// - ``giveBack(logger:)``, when ``MemoryRelease`` says a backlog has drained: glibc keeps freed
///   memory in its arenas; `malloc_trim(0)` returns every whole free page of every arena
///   (`madvise(MADV_DONTNEED)`), under each arena's own lock, so other threads keep allocating meanwhile.
public enum FreeMemory {
    /// At most two malloc arenas for the rest of the process; call it before the daemon starts its threads.
    public static func limitArenas() {
        _ = mallopt(M_ARENA_MAX, 2)
    }

    static func giveBack(logger: Logger) {
        let before = ContinuousClock.now
        let released = malloc_trim(0) == 1
        logger.debug(
            "free memory handed back after a backlog drained",
            metadata: ["released": "\(released)", "took": "\(ContinuousClock.now - before)"])
    }
}
