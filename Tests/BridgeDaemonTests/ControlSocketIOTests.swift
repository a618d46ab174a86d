import Foundation
import Locking
import Testing

@testable import BridgeDaemon

/// The control socket's system calls (docs/contract.md §8.3): mode 0600, a path longer than
/// `sun_path` served and reached through its directory, a stale socket replaced, a live one left alone.
@Suite struct ControlSocketIOTests {
    @Test func aLongPathIsServedWithMode0600AndAnsweredOnce() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("control-\(UUID().uuidString)").path
        let directory = base + "/" + String(repeating: "d", count: 60) + "/" + String(repeating: "e", count: 60)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let path = directory + "/control.sock"
        #expect(path.utf8.count > 107)

        let listener = try ControlSocketIO.listen(path: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // A second daemon leaves the live socket alone.
        #expect(throws: ControlSocketError.self) { try ControlSocketIO.listen(path: path) }

        let served = detachThread(name: "control-test") {
            // The second listen's probe connected and left without a word: answer the first line.
            while let client = ControlSocketIO.accept(listener) {
                let line = ControlSocketIO.readLine(client, limit: 100) ?? []
                defer { ControlSocketIO.close(client) }
                guard !line.isEmpty else { continue }
                ControlSocketIO.writeAll(client, Array("got \(String(decoding: line, as: UTF8.self))".utf8))
                return
            }
        }
        #expect(served)
        let reply = try ControlSocketIO.exchange("ping\n", path: path, timeoutSeconds: 5)
        #expect(reply == "got ping\n")
        ControlSocketIO.close(listener)

        // Its file left behind by a killed daemon: stale, replaced.
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(throws: ControlSocketError.self) { try ControlSocketIO.exchange("ping\n", path: path, timeoutSeconds: 1) }
        let again = try ControlSocketIO.listen(path: path)
        ControlSocketIO.close(again)
        ControlSocketIO.remove(path)
        do {
            _ = try ControlSocketIO.exchange("ping\n", path: path, timeoutSeconds: 1)
            Issue.record("connected to a removed socket")
        } catch {
            #expect(error.isConnectFailure)
        }
    }
}
