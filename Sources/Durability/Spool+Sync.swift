import NIOPosix

/// What one sync of a ``Spool`` must force to disk, taken by ``Spool/prepareSync()``: the files
/// written since the last flush and, when a segment was created since, the directory.
///
/// The point is `Sendable` and holds the files open, so it can be flushed on another thread
/// while the spool's owner goes on appending (new writes belong to the next point), and even
/// while the spool compacts or closes (the descriptors close after the flush).
public struct SpoolSyncPoint: Sendable {
    /// The files to flush, oldest first.
    let files: [SpoolFile]
    /// The spool directory, when its entries changed since it was last flushed.
    let directory: String?
    /// The last record appended when the point was taken: on disk once the flush returns.
    public let lastSequence: UInt64
    /// The delivered watermark of the newest acknowledgement record in the log at that moment.
    public let watermark: UInt64

    /// True when nothing was written since the last flush: flushing does nothing.
    public var isEmpty: Bool { files.isEmpty && directory == nil }

    /// Forces the files (`fdatasync`) and the directory (`fsync`) to disk, on the calling
    /// thread, which waits for the disk.
    ///
    /// - Throws: ``SpoolError`` from the first flush that fails.
    public func flush() throws {
        for file in files { try file.synchronize() }
        if let directory { try SpoolDirectory.synchronize(directory) }
    }

    /// ``flush()`` on the spools' sync thread: the calling task is suspended, not its thread (a
    /// thread of the cooperative pool blocked on the disk would stall every task scheduled on it).
    ///
    /// - Throws: ``SpoolError``, or NIO's error if the sync thread is not running.
    public func flushOnSyncThread() async throws {
        guard !isEmpty else { return }
        try await Spool.syncThread.runIfActive { try flush() }
    }
}

extension Spool {
    /// The one thread every spool's off-loaded flush runs on, for the life of the process (like
    /// `NIOThreadPool.singleton`, never shut down). One thread, so flushes finish in the order
    /// their points were taken: a later point is never recorded as synced while an earlier
    /// point's files are still being flushed.
    static let syncThread: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()

    /// Forces everything appended so far to disk (`fdatasync`) on the calling thread. Call it on
    /// a timer (e.g. every second) with the `onSync` or `batch` policy to bound what a power loss
    /// can take; an owner that must not block splits it into ``prepareSync()``,
    /// ``SpoolSyncPoint/flushOnSyncThread()`` and ``finishSync(_:flushed:)``.
    public func sync() throws {
        try flush(try prepareSync())
    }

    /// The first step of a sync, quick (no waiting for the disk): writes the acknowledgement
    /// record if the log lacks the current watermark (a `pwrite` into the page cache, ordered
    /// with the appends), and returns what must be flushed. Call it where appends are excluded
    /// (the owner's lock); flush the point without holding that lock; then
    /// ``finishSync(_:flushed:)``.
    ///
    /// - Throws: ``SpoolError`` after ``close()`` or when the acknowledgement record cannot be
    ///   written.
    public func prepareSync() throws -> SpoolSyncPoint {
        try ensureOpen()
        try writeAcknowledgement()
        return takeSyncPoint()
    }

    /// The last step of a sync, under the owner's lock again: records a flushed point
    /// (``syncedSequence``, ``syncedWatermark``), or — when its flush failed — keeps its files
    /// for the next sync to retry. Also valid after ``close()``.
    public func finishSync(_ point: SpoolSyncPoint, flushed: Bool) {
        if flushed {
            syncedSequence = max(syncedSequence, point.lastSequence)
            syncedWatermark = max(syncedWatermark, point.watermark)
            return
        }
        guard !isClosed else { return }
        let later = unflushedFiles.filter { file in !point.files.contains { $0 === file } }
        unflushedFiles = point.files + later
        if point.directory != nil { directoryUnflushed = true }
    }

    /// Flushes what was written since the last flush, on the calling thread (the fsync
    /// policies' flushes, rotation, close).
    func flushNow() throws {
        try flush(takeSyncPoint())
    }

    private func flush(_ point: SpoolSyncPoint) throws {
        do {
            try point.flush()
        } catch {
            finishSync(point, flushed: false)
            throw error
        }
        finishSync(point, flushed: true)
    }

    /// What is unflushed now, handed over to a sync point.
    private func takeSyncPoint() -> SpoolSyncPoint {
        defer {
            appendsSinceSync = 0
            unflushedFiles = []
            directoryUnflushed = false
        }
        return SpoolSyncPoint(
            files: unflushedFiles,
            directory: directoryUnflushed ? directory : nil,
            lastSequence: lastSequence,
            watermark: writtenWatermark
        )
    }
}
