/// Tuning of a ``Spool``.
public struct SpoolConfiguration: Sendable, Equatable {
    /// When appends are forced to disk.
    public var fsync: SpoolFsyncPolicy
    /// A segment file is closed and a new one started when the next record would make it larger
    /// than this. Compaction deletes whole segments, so the disk holds at most the pending
    /// records plus about two segments (one partly delivered, one being written).
    public var segmentBytes: Int
    /// Largest payload `append` accepts; also the largest length field recovery believes.
    public var maxPayloadBytes: Int
    /// Payload bytes of pending records kept in memory as well, so reading them back needs no
    /// `pread` (records past this stay on disk only; recovered records are never cached).
    public var memoryCacheBytes: Int
    /// The watermark is written at the latest after this many acknowledgements (it also travels
    /// with the next append, and is written by `sync`, rotation and `close`). A crash redelivers
    /// at most this many acknowledged records, plus those since the owner's last `sync`.
    public var acknowledgementBatch: Int
    /// Tests only: makes the segment files' writes and flushes fail on demand (a full disk).
    var writeFaults: SpoolWriteFaults?

    /// - Parameters:
    ///   - fsync: default ``SpoolFsyncPolicy/default``.
    ///   - segmentBytes: default 4 MiB.
    ///   - maxPayloadBytes: default 16 MiB (MQTT payloads can be large; Pusher events are ≤ 10 KiB).
    ///   - memoryCacheBytes: default 1 MiB (at 50k messages/s of 1 KiB with 10 ms in flight, half of it).
    ///   - acknowledgementBatch: default 256.
    public init(
        fsync: SpoolFsyncPolicy = .default, segmentBytes: Int = 4 << 20, maxPayloadBytes: Int = 16 << 20,
        memoryCacheBytes: Int = 1 << 20, acknowledgementBatch: Int = 256
    ) {
        self.fsync = fsync
        self.segmentBytes = segmentBytes
        self.maxPayloadBytes = maxPayloadBytes
        self.memoryCacheBytes = memoryCacheBytes
        self.acknowledgementBatch = max(1, acknowledgementBatch)
    }
}
