import Foundation
import Testing

@testable import Durability

#if os(Linux)
    /// The paths this process has open, read from `/proc/self/fd` (a deleted file reads `PATH (deleted)`).
    func openPaths() -> Set<String> {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(descriptors.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) })
    }

    /// `path` with symbolic links resolved, as `/proc/self/fd` names it.
    func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    @Suite("SpoolFile: one owner per descriptor, errors that name the operation and path")
    struct SpoolFileTests {
        @Test("a file's descriptor is closed when its last reference goes, not before")
        func closesInDeinit() throws {
            try withTemporaryDirectory { directory in
                let path = canonical(directory) + "/00000000000000000001.seg"
                do {
                    let file = try SpoolFile(path: path, access: .createNew)
                    try file.write([1, 2, 3], at: 0)
                    #expect(openPaths().contains(path))
                    let second = file
                    #expect(try second.readToEnd() == [1, 2, 3])
                }
                #expect(!openPaths().contains(path))
            }
        }

        @Test("a sync point keeps its files open past the spool's close, and they close after it")
        func syncPointOutlivesClose() throws {
            try withTemporaryDirectory { directory in
                let spool = try Spool(directory: canonical(directory), configuration: testConfiguration(fsync: .onSync))
                let segment = canonical(directory) + "/00000000000000000001.seg"
                try spool.append([1, 2, 3])
                var point: SpoolSyncPoint? = try spool.prepareSync()
                try spool.close()
                #expect(openPaths().contains(segment))
                try point?.flush()
                point = nil
                #expect(!openPaths().contains(segment))
            }
        }

        @Test("closing a spool closes every segment and the lock file")
        func closeReleasesEverything() throws {
            try withTemporaryDirectory { directory in
                let path = canonical(directory)
                let spool = try Spool(directory: path, configuration: testConfiguration(segmentBytes: 256))
                for sequence in 1...UInt64(20) { try spool.append(payload(for: sequence, size: 50)) }
                #expect(openPaths().filter { $0.hasPrefix(path + "/") }.count > 2)
                try spool.close()
                #expect(openPaths().filter { $0.hasPrefix(path + "/") }.isEmpty)
            }
        }

        @Test("failures throw SpoolError naming the operation, the path and the system's reason")
        func errorsNameOperationAndPath() throws {
            try withTemporaryDirectory { directory in
                let missing = directory + "/missing.seg"
                let open = try #require(throws: SpoolError.self) { try SpoolFile(path: missing, access: .readWrite) }
                #expect(open.path == missing)
                #expect(open.description.contains("open failed"))
                #expect(open.description.contains("errno \(ENOENT)"))

                let existing = directory + "/existing.seg"
                _ = try SpoolFile(path: existing, access: .createNew)
                let create = try #require(throws: SpoolError.self) { try SpoolFile(path: existing, access: .createNew) }
                #expect(create.description.contains("create failed"))
                #expect(create.description.contains("errno \(EEXIST)"))

                let notDirectory = try #require(throws: SpoolError.self) {
                    try SpoolFile(path: existing, access: .directory)
                }
                #expect(notDirectory.description.contains("open directory failed"))

                let file = try SpoolFile(path: existing, access: .readWrite)
                try file.write([1, 2, 3], at: 0)
                let short = try #require(throws: SpoolError.self) { try file.read(count: 4, at: 0) }
                #expect(short.description.contains("file shorter than expected"))
            }
        }

        @Test("a segment name that is not a file stops opening with an error, not a trap")
        func unopenableSegment() throws {
            try withTemporaryDirectory { directory in
                let segment = directory + "/00000000000000000001.seg"
                try FileManager.default.createDirectory(atPath: segment, withIntermediateDirectories: false)
                let error = try #require(throws: SpoolError.self) {
                    _ = try Spool(directory: directory, configuration: testConfiguration())
                }
                #expect(error.path == segment)
                #expect(error.description.contains("errno \(EISDIR)"))
                // The lock was released with the failed spool: once repaired, the directory opens.
                try FileManager.default.removeItem(atPath: segment)
                try Spool(directory: directory, configuration: testConfiguration()).close()
            }
        }

        @Test("a spool under a path that is a file reports the directory it could not create")
        func directoryUnderAFile() throws {
            try withTemporaryDirectory { directory in
                let file = directory + "/plain"
                _ = try SpoolFile(path: file, access: .createNew)
                let error = try #require(throws: SpoolError.self) {
                    _ = try Spool(directory: file + "/spool", configuration: testConfiguration())
                }
                #expect(error.description.contains("create directory failed"))
            }
        }

        @Test("a read-only directory refuses the spool with an error", .enabled(if: getuid() != 0, "root ignores permissions"))
        func readOnlyDirectory() throws {
            try withTemporaryDirectory { directory in
                try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: directory)
                defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory) }
                let error = try #require(throws: SpoolError.self) {
                    _ = try Spool(directory: directory, configuration: testConfiguration())
                }
                #expect(error.description.contains("errno \(EACCES)"))
            }
        }

        @Test("the directory lock is held as long as its value lives")
        func directoryLock() throws {
            try withTemporaryDirectory { directory in
                do {
                    let lock = try SpoolDirectoryLock(directory: directory)
                    let error = try #require(throws: SpoolError.self) { _ = try SpoolDirectoryLock(directory: directory) }
                    #expect(error == SpoolError.locked(path: directory))
                    _ = consume lock
                }
                _ = try SpoolDirectoryLock(directory: directory)
            }
        }
    }
#endif
