#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One segment file of a spool, open for reading (and, for the last one, appending), with the
/// spool's bookkeeping about it. Owned by its ``Spool`` (not `Sendable`); only the ``SpoolFile``
/// crosses to the sync thread.
final class SpoolSegment {
    /// The data sequence the file's name promises for its first record.
    let firstSequence: UInt64
    /// The file's path.
    let path: String
    /// The open file; nil once the spool is closed (its descriptor closes when no sync holds it).
    private(set) var file: SpoolFile?
    /// Bytes of valid records in the file (where the next record goes).
    var size: Int
    /// The sequence of the last data record in the file (`firstSequence - 1`: none).
    var lastDataSequence: UInt64

    /// A segment whose records up to `size` are valid.
    init(firstSequence: UInt64, file: SpoolFile, size: Int, lastDataSequence: UInt64) {
        self.firstSequence = firstSequence
        self.path = file.path
        self.file = file
        self.size = size
        self.lastDataSequence = lastDataSequence
    }

    /// True when the file holds at least one data record.
    var hasData: Bool { lastDataSequence >= firstSequence }

    /// The open file, or ``SpoolError/closed(path:)``.
    func openFile(directory: String) throws -> SpoolFile {
        guard let file else { throw SpoolError.closed(path: directory) }
        return file
    }

    /// Lets go of the file: closed now, or when the last sync holding it is done.
    func release() { file = nil }
}

extension Spool {
    static let segmentSuffix = ".seg"

    /// The conventional spool directory of one bridge direction:
    /// `STATE_DIR/<bridge>/<direction>.spool` (docs/contract.md §4 `state_dir`), e.g.
    /// `/var/lib/pusher-mqtt-bridge/factory/mqtt-to-pusher.spool`. Bridge names are
    /// `[a-z0-9_-]+` (validated by the config), so they are safe as path components.
    public static func directory(stateDirectory: String, bridge: String, direction: String) -> String {
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        return base + "/" + bridge + "/" + direction + ".spool"
    }

    /// `DIRECTORY/00000000000000000042.seg`: 20 digits so names sort like their numbers.
    static func segmentPath(directory: String, firstSequence: UInt64) -> String {
        let digits = String(firstSequence)
        return directory + "/" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + segmentSuffix
    }

    /// The first sequences of the segment files in `directory`, sorted.
    static func segmentNames(in directory: String) throws -> [UInt64] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw SpoolError.fileSystem("list directory", path: directory, message: "\(error)")
        }
        return names.compactMap { name -> UInt64? in
            guard name.hasSuffix(segmentSuffix) else { return nil }
            let stem = name.dropLast(segmentSuffix.count)
            guard stem.count == 20, stem.allSatisfy(\.isASCII), stem.allSatisfy(\.isNumber) else { return nil }
            return UInt64(stem)
        }.sorted()
    }
}
