import Locking
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("detachThread")
struct DetachedThreadTests {
    /// The name the calling thread carries (its `comm`, without the newline).
    static func currentThreadName() -> String {
        let descriptor = open("/proc/thread-self/comm", O_RDONLY)
        guard descriptor >= 0 else { return "?" }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix(max(0, count)).filter { $0 != 10 }, as: UTF8.self)
    }

    /// Starts a thread named `name` and returns the name its body saw, once the body ran.
    static func nameSeenByBody(of name: String) async -> String {
        await withCheckedContinuation { continuation in
            let started = detachThread(name: name) { continuation.resume(returning: currentThreadName()) }
            #expect(started)
        }
    }

    /// The body runs on a thread of its own (no test thread carries this name) under the given name.
    @Test func bodyRunsOnANamedThreadOfItsOwn() async {
        #expect(Self.currentThreadName() != "mqtt-bridge")
        #expect(await Self.nameSeenByBody(of: "mqtt-bridge") == "mqtt-bridge")
    }

    /// A name longer than Linux's 15 bytes is cut, not refused (the body still runs, named).
    @Test func longNameIsTruncatedToFifteenBytes() async {
        #expect(await Self.nameSeenByBody(of: "mqtt-a-very-long-client-identifier") == "mqtt-a-very-lon")
    }

    /// A name cut inside a multi-byte character still names the thread (bytes, not characters, are kept).
    @Test func multiByteNameIsCutByBytes() async {
        let name = await Self.nameSeenByBody(of: "ééééééééé")  // 18 bytes: 7 characters and half of one remain
        #expect(Array(name.utf8.prefix(14)) == Array("ééééééé".utf8))
    }

    /// Many threads at once each run their body exactly once.
    @Test func everyBodyRunsOnce() async {
        let runs = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<32 {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let started = detachThread(name: "t\(index)") {
                            runs.withLock { $0 += 1 }
                            continuation.resume()
                        }
                        #expect(started)
                    }
                }
            }
        }
        #expect(runs.withLock { $0 } == 32)
    }

    /// The test hook makes the creation fail for its task only: the body never runs, and a thread
    /// started from another task meanwhile still runs.
    @Test func refusedCreationRunsNothing() async {
        let ran = Locked(false)
        let started = DetachedThreadTesting.$refusesCreation.withValue(true) {
            detachThread(name: "refused") { ran.withLock { $0 = true } }
        }
        #expect(!started)
        #expect(await Self.nameSeenByBody(of: "not-refused") == "not-refused")
        #expect(!ran.withLock { $0 })
    }
}
