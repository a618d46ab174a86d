import BridgeCore

#if canImport(Glibc)
    import Glibc
#endif

extension UTCTimestamp {
    /// The wall clock now: the daemon's one read of it (the core takes time as data). Kept in a file
    /// of its own so that it is found; its callers are the runtime's event handlers, which stamp
    /// what arrives (`receivedAt`) before handing it to the machines.
    static func now() -> UTCTimestamp {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UTCTimestamp(millisecondsSince1970: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
    }
}
