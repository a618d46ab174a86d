import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A real mosquitto broker that a test starts, stops, restarts and kills by PID.
///
/// Each instance has its own temporary directory (config, log, persistence, password file), a
/// free loopback port chosen at creation and kept across restarts (``LoopbackPort/free()``), and is
/// killed when released (`deinit`) so a failing test does not leave it behind. Shared by the
/// MosquittoClient and the daemon's integration tests.
///
///     let broker = try Mosquitto(.init(persistence: true))
///     try await broker.start()
///     ... broker.port ...
///     try await broker.restart()
///     await broker.stop()
public final class Mosquitto: Sendable {
    /// How the broker is set up.
    public struct Options: Sendable {
        /// `allow_anonymous`.
        public var allowAnonymous = true
        /// `persistence` (sessions and retained messages survive `restart()`).
        public var persistence = false
        /// Users for a `password_file` (name → password). Empty: no password file.
        public var users: [String: String] = [:]
        /// A TLS listener instead of plain TCP.
        public var tls: TLSFiles?
        /// Extra config lines.
        public var extraConfig: [String] = []

        public init(
            allowAnonymous: Bool = true, persistence: Bool = false, users: [String: String] = [:],
            tls: TLSFiles? = nil, extraConfig: [String] = []
        ) {
            self.allowAnonymous = allowAnonymous
            self.persistence = persistence
            self.users = users
            self.tls = tls
            self.extraConfig = extraConfig
        }
    }

    /// Certificate files for a TLS listener.
    public struct TLSFiles: Sendable {
        public var caFile: String
        public var certificateFile: String
        public var keyFile: String
        /// `require_certificate true` (mutual TLS).
        public var requireClientCertificate = false

        public init(caFile: String, certificateFile: String, keyFile: String, requireClientCertificate: Bool = false) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.requireClientCertificate = requireClientCertificate
        }
    }

    /// The broker's loopback port.
    public let port: Int
    /// The broker's temporary directory (removed on deinit).
    public let directory: String
    public let options: Options
    /// The broker's PID, 0 when not running (an atomic: visible to ThreadSanitizer, unlike Mutex).
    private let process = Atomic<Int32>(0)

    public static let executable = "/usr/sbin/mosquitto"

    public init(_ options: Options = .init()) throws {
        Self.reapOrphans
        self.options = options
        self.port = try LoopbackPort.free()
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("mosquitto-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        self.directory = dir
        try "\(getpid())\n".write(toFile: dir + "/owner.pid", atomically: true, encoding: .utf8)
        try writeConfig()
    }

    /// Once per test process: brokers left by an earlier test run that was killed (its `deinit`
    /// never ran) are stopped by the PID recorded in their directory, if that run's process is gone.
    private static let reapOrphans: Void = {
        let temporary = FileManager.default.temporaryDirectory.path
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        for entry in entries where entry.hasPrefix("mosquitto-test-") {
            let dir = temporary + "/" + entry
            func pid(_ file: String) -> Int32? {
                (try? String(contentsOfFile: dir + "/" + file, encoding: .utf8))
                    .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            guard let owner = pid("owner.pid"), owner != getpid(), Glibc.kill(owner, 0) != 0 else { continue }
            // Only if that PID is still this directory's broker (PIDs get reused).
            if let broker = pid("mosquitto.pid"), broker > 0,
                let commandLine = try? String(contentsOfFile: "/proc/\(broker)/cmdline", encoding: .utf8),
                commandLine.contains(dir + "/mosquitto.conf")
            {
                _ = Glibc.kill(broker, SIGKILL)
            }
            try? FileManager.default.removeItem(atPath: dir)
        }
    }()

    deinit {
        killNow()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var configPath: String { directory + "/mosquitto.conf" }
    public var logPath: String { directory + "/mosquitto.log" }

    /// The broker's log so far (for failure messages).
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    private func writeConfig() throws {
        var lines = [
            "per_listener_settings false",
            "allow_anonymous \(options.allowAnonymous)",
            "max_queued_messages 0",
            "set_tcp_nodelay true",
            "user root",
            "log_dest file \(logPath)",
            "log_type error", "log_type warning", "log_type notice", "log_type information",
            "persistence \(options.persistence)",
            "persistence_location \(directory)/",
        ]
        if !options.users.isEmpty {
            let passwordFile = directory + "/passwords"
            _ = FileManager.default.createFile(atPath: passwordFile, contents: Data())
            for (user, password) in options.users.sorted(by: { $0.key < $1.key }) {
                try Shell.run("/usr/bin/mosquitto_passwd", ["-b", passwordFile, user, password])
            }
            lines.append("password_file \(passwordFile)")
        }
        lines.append("listener \(port) 127.0.0.1")
        if let tls = options.tls {
            lines += [
                "cafile \(tls.caFile)", "certfile \(tls.certificateFile)", "keyfile \(tls.keyFile)",
                "require_certificate \(tls.requireClientCertificate)",
            ]
        }
        lines += options.extraConfig
        try (lines.joined(separator: "\n") + "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Replaces the users in the password file (takes effect on the next `start`/`restart`).
    public func setUsers(_ users: [String: String]) throws {
        let passwordFile = directory + "/passwords"
        _ = FileManager.default.createFile(atPath: passwordFile, contents: Data())
        for (user, password) in users.sorted(by: { $0.key < $1.key }) {
            try Shell.run("/usr/bin/mosquitto_passwd", ["-b", passwordFile, user, password])
        }
    }

    /// Starts the broker and waits until its port accepts connections. The waiting is done on a
    /// thread outside the cooperative pool, as for ``stop()``, ``kill()`` and ``restart()``: with
    /// two cores the pool has two threads, and a test blocking one starves every test beside it.
    public func start() async throws {
        try await Self.offThePool { try self.startNow() }
    }

    private func startNow() throws {
        // A restart may find the port briefly held (e.g. a client's connect attempt); retry.
        for attempt in 0..<20 {
            do {
                return try startOnce()
            } catch let failure as TestFailure where failure.description.contains("Address already in use") && attempt < 19 {
                usleep(100_000)
            }
        }
    }

    private func startOnce() throws {
        let pid = try Self.spawn(Self.executable, ["-c", configPath])
        process.store(pid, ordering: .sequentiallyConsistent)
        try? "\(pid)\n".write(toFile: directory + "/mosquitto.pid", atomically: true, encoding: .utf8)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let status = Self.reap(pid) {
                process.store(0, ordering: .sequentiallyConsistent)
                throw TestFailure("mosquitto exited at start (status \(status)): \(log)")
            }
            if LoopbackPort.accepts(port) { return }
            usleep(10_000)
        }
        killNow()
        throw TestFailure("mosquitto did not accept on port \(port) within 10 s: \(log)")
    }

    /// The running broker's PID.
    public var pid: Int32? {
        let pid = process.load(ordering: .sequentiallyConsistent)
        return pid == 0 ? nil : pid
    }

    /// SIGTERM and wait: a clean stop (persistence is written).
    public func stop() async {
        await Self.offThePool { self.stopNow() }
    }

    private func stopNow() {
        let pid = process.exchange(0, ordering: .sequentiallyConsistent)
        guard pid != 0 else { return }
        Glibc.kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if Self.reap(pid) != nil { return }
            usleep(5_000)
        }
        Glibc.kill(pid, SIGKILL)
        Self.wait(pid)
    }

    /// SIGKILL and wait: a crash.
    public func kill() async {
        await Self.offThePool { self.killNow() }
    }

    private func killNow() {
        let pid = process.exchange(0, ordering: .sequentiallyConsistent)
        guard pid != 0 else { return }
        Glibc.kill(pid, SIGKILL)
        Self.wait(pid)
    }

    /// posix_spawn with stdout/stderr to /dev/null; returns the PID.
    public static func spawn(_ executable: String, _ arguments: [String]) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else of the test process: SwiftNIO's sockets are not close-on-exec, and a broker
        // that inherited another test's connection held it open after that test closed it (its
        // client never saw the close: issue 26's "no response within 5 s" in HTTPConnectionPoolTests).
        // `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+) is not imported: looked up by name,
        // as in Sources/BridgeDaemon/Daemon/ChildProcess.swift.
        _ = addCloseFrom?(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // The test runner's threads may block or ignore signals; the child inherits both, and a
        // broker that never sees SIGTERM cannot stop cleanly (and write its persistence).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw TestFailure("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))") }
        return pid
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// The exit status if `pid` has exited (and reaps it), else `nil`.
    public static func reap(_ pid: Int32) -> Int32? {
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        if rc == pid { return status }
        if rc < 0 { return -1 }  // not our child any more
        return nil
    }

    /// Blocks until `pid` has exited.
    public static func wait(_ pid: Int32) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Clean stop, then start again on the same port with the same state directory.
    public func restart() async throws {
        await stop()
        try await start()
    }

    /// Runs blocking `body` (waitpid, polling a port) on a Dispatch thread, not on the cooperative pool.
    static func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    static func offThePool(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                body()
                continuation.resume()
            }
        }
    }
}

/// A test-support failure with a message.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs helper programs (openssl, mosquitto_passwd) and fails with their output.
public enum Shell {
    public static func run(_ executable: String, _ arguments: [String], in directory: String? = nil) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw TestFailure(
                "\(executable) \(arguments.joined(separator: " ")) failed: \(String(decoding: output, as: UTF8.self))")
        }
    }
}
