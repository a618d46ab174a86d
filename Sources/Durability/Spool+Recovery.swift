// Opening a spool directory: scanning every segment, truncating a torn tail, moving damage aside.
extension Spool {
    /// One recovered data record.
    struct RecoveredRecord {
        var sequence: UInt64
        var segment: SpoolSegment
        var offset: Int
        var length: Int
    }

    /// The state recovery hands to `init`.
    struct Recovered {
        var segments: [SpoolSegment] = []
        var records: [RecoveredRecord] = []
        var lastSequence: UInt64 = 0
        var watermark: UInt64 = 0
    }

    /// Reads every segment of `directory` in order and repairs what a crash or the disk left
    /// behind (see the type's "Recovery and guarantees"). Files opened before an error close
    /// with the segments that hold them.
    static func recover(
        directory: String,
        configuration: SpoolConfiguration,
        report: inout SpoolRecoveryReport
    ) throws -> Recovered {
        var recovered = Recovered()
        let names = try segmentNames(in: directory)
        report.segmentsFound = names.count
        var expected: UInt64?
        var highestAcknowledgement: UInt64 = 0
        for (position, first) in names.enumerated() {
            let path = segmentPath(directory: directory, firstSequence: first)
            let isLast = position == names.count - 1
            if let expected, first != expected {
                let moved = try SpoolDirectory.moveAside(
                    names[position...].map { segmentPath(directory: directory, firstSequence: $0) }
                )
                report.damage.append(
                    SpoolDamage(
                        file: path,
                        offset: 0,
                        reason: .segmentGap(expected: expected, found: first),
                        repair: .movedAside(moved)
                    )
                )
                break
            }
            var file = try SpoolFile(path: path, access: .readWrite, faults: configuration.writeFaults)
            let bytes = try file.readToEnd()
            let scan = SpoolRecordFormat.scan(
                bytes,
                firstSequence: first,
                maxPayloadBytes: configuration.maxPayloadBytes
            )
            var keptLength = bytes.count
            var stopAfterThis = false
            if let stop = scan.stop {
                keptLength = scan.validLength
                if isLast && stop.reachesEnd {
                    try file.truncate(to: keptLength)
                    report.damage.append(
                        SpoolDamage(
                            file: path,
                            offset: stop.offset,
                            reason: stop.reason,
                            repair: .truncatedTornTail(discardedBytes: bytes.count - keptLength)
                        )
                    )
                } else {
                    // Keep the damaged file whole for inspection, continue with its valid prefix.
                    var moved = try SpoolDirectory.moveAside([path])
                    file = try writeNewFile(path, bytes: Array(bytes[0..<keptLength]))
                    moved += try SpoolDirectory.moveAside(
                        names[(position + 1)...].map { segmentPath(directory: directory, firstSequence: $0) }
                    )
                    report.damage.append(
                        SpoolDamage(
                            file: path,
                            offset: stop.offset,
                            reason: stop.reason,
                            repair: .movedAside(moved)
                        )
                    )
                    stopAfterThis = true
                }
            }
            let segment = SpoolSegment(
                firstSequence: first,
                file: file,
                size: keptLength,
                lastDataSequence: scan.nextSequence - 1
            )
            recovered.segments.append(segment)
            for record in scan.records {
                recovered.records.append(
                    RecoveredRecord(
                        sequence: record.sequence,
                        segment: segment,
                        offset: record.payloadOffset,
                        length: record.payloadLength
                    )
                )
            }
            if let acknowledgement = scan.highestAcknowledgement {
                highestAcknowledgement = max(highestAcknowledgement, acknowledgement)
            }
            expected = scan.nextSequence
            if stopAfterThis { break }
        }
        if recovered.segments.isEmpty {
            let file = try SpoolFile(
                path: segmentPath(directory: directory, firstSequence: 1), access: .createNew, faults: configuration.writeFaults)
            recovered.segments.append(SpoolSegment(firstSequence: 1, file: file, size: 0, lastDataSequence: 0))
            if configuration.fsync != .never { try SpoolDirectory.synchronize(directory) }
        }
        let first = recovered.segments.first?.firstSequence ?? 1
        recovered.lastSequence = (recovered.segments.last?.lastDataSequence) ?? 0
        // The oldest surviving segment's name bounds the watermark from below (older segments
        // were only deleted once fully delivered); acknowledgement records raise it. A watermark
        // beyond the last record (its data lost, the acknowledgement not) is clamped.
        recovered.watermark = min(max(first - 1, highestAcknowledgement), recovered.lastSequence)
        return recovered
    }

    /// Creates `path` (which must not exist) with `bytes`, flushed, and returns it open.
    private static func writeNewFile(_ path: String, bytes: [UInt8]) throws -> SpoolFile {
        let file = try SpoolFile(path: path, access: .createNew)
        try file.write(bytes, at: 0)
        try file.synchronize()
        return file
    }
}
