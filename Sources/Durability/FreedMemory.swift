#if canImport(Glibc)
    import Glibc
#endif

/// Gives memory the allocator holds freed back to the kernel, after a backlog drained.
///
/// glibc's malloc keeps freed heap pages mapped (and resident) for reuse; after 64 MiB of held
/// 8 KB messages drained, RSS stayed 85 MB above idle until `malloc_trim(0)` returned it (to within
/// 2 MB of idle: Benchmarks/results/memory). `malloc_trim` is looked up with `dlsym` because the
/// Glibc module does not export `<malloc.h>`; elsewhere (musl, Darwin) this does nothing.
enum FreedMemory {
    /// Backlogs that held at least this many bytes release freed memory when they drain.
    static let releaseAfterHoldingBytes = 4 << 20

    /// `malloc_trim`, if this C library has it.
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return nil }  // nil: RTLD_DEFAULT
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
            return nil
        #endif
    }()

    /// Returns whole free pages of every malloc arena to the kernel (`malloc_trim(0)`).
    static func release() {
        _ = trim?(0)
    }
}
