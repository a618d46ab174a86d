import Foundation
import Testing

@testable import Durability

#if os(Linux)
    import Glibc

    /// A real process crash: the `spool-bench crash-writer` child appends records and prints every
    /// sequence `append` returned; the test SIGKILLs it mid-stream and recovers the directory.
    /// Claim under test (SpoolFsyncPolicy docs): under every policy a process crash loses nothing
    /// that `append` had returned for, and recovery yields a gap-free, intact prefix.
    @Suite("Spool: recovery after SIGKILL of a writing process")
    struct SpoolCrashTests {
        /// Same formula as `crashWriterPayload` in `Sources/spool-bench/main.swift`.
        func expectedPayload(_ sequence: UInt64) -> [UInt8] {
            (0..<(1 + Int(sequence % 700))).map { UInt8(truncatingIfNeeded: Int(sequence) &* 7 &+ $0) }
        }

        /// The spool-bench executable next to the test bundle (SwiftPM builds every product before
        /// running tests).
        func writerExecutable() throws -> URL {
            let testBinary = URL(
                fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            )
            var directory = testBinary.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("spool-bench")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "spool-bench next to \(testBinary.path)"])
        }

        @Test(
            "killed mid-append, the spool recovers every confirmed record in order",
            arguments: ["never", "batch", "always"]
        )
        func sigkillWhileAppending(policy: String) throws {
            let executable = try writerExecutable()
            try withTemporaryDirectory { directory in
                var confirmed: UInt64 = 0
                for round in 0..<3 {
                    let process = Process()
                    process.executableURL = executable
                    process.arguments = ["crash-writer", directory, policy]
                    let output = Pipe()
                    process.standardOutput = output
                    try process.run()
                    defer {
                        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                        process.waitUntilExit()
                    }
                    // Let it write for a while (more with cheap policies), then kill it without warning.
                    let reader = output.fileHandleForReading
                    var text = ""
                    let wanted = policy == "always" ? 40 : 3_000 * (round + 1)
                    while text.split(separator: "\n").count < wanted {
                        let chunk = reader.availableData
                        if chunk.isEmpty { break }
                        text += String(decoding: chunk, as: UTF8.self)
                    }
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                    #expect(process.terminationReason == .uncaughtSignal)
                    text += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
                    let lines = text.split(separator: "\n")
                    // The last line may be cut; every complete one is a returned append.
                    let last = lines.dropLast(text.hasSuffix("\n") ? 0 : 1).last.flatMap { UInt64($0) } ?? 0
                    #expect(last > confirmed, "the writer made progress in round \(round)")
                    confirmed = last

                    let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 64 << 10))
                    let records = try allPending(spool)
                    #expect(records.count >= Int(confirmed), "nothing confirmed was lost")
                    #expect(records.first?.sequence == 1)
                    for (offset, record) in records.enumerated()
                    where record.sequence != UInt64(offset + 1) || record.payload != expectedPayload(record.sequence) {
                        Issue.record("record at position \(offset) is \(record.sequence) with a wrong payload or sequence")
                        break
                    }
                    confirmed = UInt64(records.count)
                    try spool.close()
                }
            }
        }
    }
#endif  // os(Linux): the writer is found through /proc/self/exe
