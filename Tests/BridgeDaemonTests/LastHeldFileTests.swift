import BridgeCore
import Foundation
import Testing

@testable import BridgeDaemon

/// `<state_dir>/<bridge>/pusher_last_held` on a real file system (docs/pusher-merge.md).
@Suite struct LastHeldFileTests {
    static func folder() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("last-held-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/demo", withIntermediateDirectories: true)
        return directory
    }

    @Test func noFileIsAFirstStart() throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let read = LastHeldFile(stateDirectory: directory, bridge: "demo").read()
        #expect(read.times.isEmpty && read.badLines == 0)
    }

    @Test func whatIsWrittenIsReadBackAndReplacesTheOldFileWhole() throws {
        // Expected: the second write replaces the first (no temporary file left behind).
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = LastHeldFile(stateDirectory: directory + "/", bridge: "demo")
        #expect(file.path == directory + "/demo/pusher_last_held")
        #expect(file.write(["a": UTCTimestamp(millisecondsSince1970: 1_790_000_000_000)]) == nil)
        let times = ["b": UTCTimestamp(millisecondsSince1970: 1_790_000_000_500)]
        #expect(file.write(times) == nil)
        #expect(file.read().times == times)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/demo") == ["pusher_last_held"])
    }

    @Test func aFileThatIsNotTextIsOneBadLine() throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = LastHeldFile(stateDirectory: directory, bridge: "demo")
        try Data([0xFF, 0xFE, 0x00, 0x31]).write(to: URL(fileURLWithPath: file.path))
        let read = file.read()
        #expect(read.times.isEmpty && read.badLines == 1)
    }

    @Test func anUnwritableFolderIsReportedNotFatal() throws {
        // Expected: the error text names the file; nothing thrown.
        let file = LastHeldFile(stateDirectory: "/nonexistent-\(UUID().uuidString)", bridge: "demo")
        let problem = file.write([:])
        #expect(problem?.contains("pusher_last_held.tmp") == true)
    }
}
