// Acknowledging delivered records, the delivered watermark, and compaction (deleting segments
// that hold nothing pending).
extension Spool {
    // MARK: acknowledging

    /// Marks one record delivered. Acknowledgements may arrive in any order; the durable
    /// watermark only moves over a gap-free prefix.
    ///
    /// - Returns: false when `sequence` is not pending (already acknowledged, or never appended).
    @discardableResult
    public func acknowledge(_ sequence: UInt64) throws -> Bool {
        try ensureOpen()
        guard sequence > deliveredWatermark, sequence <= lastSequence,
            !acknowledgedAboveWatermark.contains(sequence)
        else { return false }
        pendingBytes -= index[Int(sequence - deliveredWatermark - 1)].length
        if sequence == deliveredWatermark + 1 {
            try advanceWatermark(to: sequence)
        } else {
            acknowledgedAboveWatermark.insert(sequence)
        }
        return true
    }

    /// Marks every record up to `sequence` (clamped to ``lastSequence``) delivered.
    ///
    /// - Returns: how many records became delivered by this call.
    @discardableResult
    public func acknowledge(upTo sequence: UInt64) throws -> Int {
        try ensureOpen()
        let target = min(sequence, lastSequence)
        guard target > deliveredWatermark else { return 0 }
        var newlyDelivered = 0
        var current = deliveredWatermark + 1
        while current <= target {
            if acknowledgedAboveWatermark.remove(current) == nil {
                pendingBytes -= index[Int(current - deliveredWatermark - 1)].length
                newlyDelivered += 1
            }
            current += 1
        }
        try advanceWatermark(to: target)
        return newlyDelivered
    }

    // MARK: watermark and compaction

    /// Moves the watermark to `sequence` (all records up to it are acknowledged), then past
    /// any records acknowledged out of order right after it, writes the acknowledgement record
    /// and deletes segments that hold nothing pending.
    private func advanceWatermark(to sequence: UInt64) throws {
        var watermark = sequence
        while acknowledgedAboveWatermark.remove(watermark + 1) != nil {
            watermark += 1
        }
        for _ in 0..<Int(watermark - deliveredWatermark) {
            cachedBytes -= index.removeFirst().cached?.count ?? 0
        }
        deliveredWatermark = watermark
        unwrittenAcknowledgements += 1

        // Compaction: a segment whose every data record is delivered is no longer needed.
        // Never the active one (it carries the newest acknowledgement record); the oldest
        // surviving segment's name keeps the watermark recoverable (name − 1 ≤ watermark), so
        // compaction needs no acknowledgement record first — and runs before writing one, which
        // a full disk may refuse, so that it still gives space back.
        // The deletion is not made durable with a directory fsync: a segment that reappears
        // after a power loss holds only records at or below the watermark, or — if the
        // acknowledgement record was lost too — records that are then delivered again.
        while segments.count > 1, let oldest = segments.first, oldest.lastDataSequence <= watermark {
            // Deleted data needs no flush; the descriptor closes now, or after a sync in
            // progress that still holds it.
            if let file = oldest.file { unflushedFiles.removeAll { $0 === file } }
            oldest.release()
            try SpoolDirectory.remove(oldest.path)
            diskBytes -= oldest.size
            segments.removeFirst()
        }
        if unwrittenAcknowledgements >= configuration.acknowledgementBatch { try writeAcknowledgement() }
    }

    /// The acknowledgement record for the current watermark if the file does not have it yet.
    func pendingAcknowledgementRecord() -> [UInt8] {
        guard unwrittenAcknowledgements > 0 else { return [] }
        return SpoolRecordFormat.encode(kind: .acknowledgement, sequence: deliveredWatermark, payload: [])
    }

    /// Writes the current watermark if the file does not have it yet.
    func writeAcknowledgement() throws {
        let record = pendingAcknowledgementRecord()
        guard !record.isEmpty, let active = segments.last else { return }
        try write(record, to: active)
        acknowledgementWritten()
        active.size += record.count
        diskBytes += record.count
    }

    /// The log now carries the current watermark.
    func acknowledgementWritten() {
        unwrittenAcknowledgements = 0
        writtenWatermark = deliveredWatermark
    }

    /// When every record is delivered, starts an empty segment named after the next sequence and
    /// deletes the others, the active one included: its delivered records, which compaction keeps
    /// while it is active, free their space (a full disk may need it to take the next write). The
    /// new segment's name carries the watermark, so no acknowledgement record is needed. A crash
    /// between the creation and the deletions leaves a valid log (the old segments, then the empty
    /// one); their records come again only if their acknowledgement record had not been written.
    ///
    /// `skipping` sequences after the last one are counted delivered without being written (the
    /// acknowledged head of a degraded backlog's memory tail): the new segment is named after them.
    /// A crash before the old segments are deleted then finds a gap before the new, empty segment,
    /// which recovery moves aside (reported as damage); the old records are kept.
    ///
    /// - Returns: true when the segments were replaced; false when something is pending, or the
    ///   active segment is already empty and nothing is skipped.
    /// - Throws: ``SpoolError`` when the new segment cannot be created or an old one deleted.
    @discardableResult
    func restartEmptyIfDelivered(skipping skip: UInt64 = 0) throws -> Bool {
        try ensureOpen()
        let first = lastSequence + skip + 1
        guard index.isEmpty, let active = segments.last, active.size > 0 || skip > 0, active.firstSequence != first else {
            return false
        }
        let file = try SpoolFile(
            path: Spool.segmentPath(directory: directory, firstSequence: first), access: .createNew,
            faults: configuration.writeFaults)
        segments.append(SpoolSegment(firstSequence: first, file: file, size: 0, lastDataSequence: first - 1))
        directoryUnflushed = true
        lastSequence = first - 1
        deliveredWatermark = first - 1
        acknowledgementWritten()
        while segments.count > 1, let oldest = segments.first {
            if let file = oldest.file { unflushedFiles.removeAll { $0 === file } }
            oldest.release()
            try SpoolDirectory.remove(oldest.path)
            diskBytes -= oldest.size
            segments.removeFirst()
        }
        return true
    }
}
