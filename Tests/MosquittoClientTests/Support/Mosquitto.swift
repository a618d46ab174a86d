import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A real mosquitto broker that a test starts, stops, restarts and kills by PID.
///
/// Each instance has its own temporary directory (config, log, persistence, password file), a
/// free loopback port chosen at creation and kept across restarts, and is killed when released
/// (`deinit`) so a failing test does not leave it behind. Reusable by the daemon's tests.
///
///     let broker = try Mosquitto(.init(persistence: true))
///     try broker.start()
///     ... broker.port ...
///     try broker.restart()
///     broker.stop()
final class Mosquitto: Sendable {
    /// How the broker is set up.
    struct Options: Sendable {
        /// `allow_anonymous`.
        var allowAnonymous = true
        /// `persistence` (sessions and retained messages survive `restart()`).
        var persistence = false
        /// Users for a `password_file` (name → password). Empty: no password file.
        var users: [String: String] = [:]
        /// A TLS listener instead of plain TCP.
        var tls: TLSFiles?
        /// Extra config lines.
        var extraConfig: [String] = []

        init(
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
    struct TLSFiles: Sendable {
        var caFile: String
        var certificateFile: String
        var keyFile: String
        /// `require_certificate true` (mutual TLS).
        var requireClientCertificate = false
    }

    /// The broker's loopback port.
    let port: Int
    /// The broker's temporary directory (removed on deinit).
    let directory: String
    let options: Options
    /// The broker's PID, 0 when not running (an atomic: visible to ThreadSanitizer, unlike Mutex).
    private let process = Atomic<Int32>(0)

    static let executable = "/usr/sbin/mosquitto"

    init(_ options: Options = .init()) throws {
        Self.reapOrphans
        self.options = options
        self.port = try Self.freePort()
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
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var configPath: String { directory + "/mosquitto.conf" }
    var logPath: String { directory + "/mosquitto.log" }

    /// The broker's log so far (for failure messages).
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

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
    func setUsers(_ users: [String: String]) throws {
        let passwordFile = directory + "/passwords"
        _ = FileManager.default.createFile(atPath: passwordFile, contents: Data())
        for (user, password) in users.sorted(by: { $0.key < $1.key }) {
            try Shell.run("/usr/bin/mosquitto_passwd", ["-b", passwordFile, user, password])
        }
    }

    /// Starts the broker and waits until its port accepts connections.
    func start() throws {
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
            if Self.accepts(port: port) { return }
            usleep(10_000)
        }
        kill()
        throw TestFailure("mosquitto did not accept on port \(port) within 10 s: \(log)")
    }

    /// The running broker's PID.
    var pid: Int32? {
        let pid = process.load(ordering: .sequentiallyConsistent)
        return pid == 0 ? nil : pid
    }

    /// SIGTERM and wait: a clean stop (persistence is written).
    func stop() {
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
    func kill() {
        let pid = process.exchange(0, ordering: .sequentiallyConsistent)
        guard pid != 0 else { return }
        Glibc.kill(pid, SIGKILL)
        Self.wait(pid)
    }

    /// posix_spawn with stdout/stderr to /dev/null; returns the PID.
    static func spawn(_ executable: String, _ arguments: [String]) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else of the test process: SwiftNIO's sockets are not close-on-exec, and a broker
        // that inherited another test's connection held it open after that test closed it (its
        // client never saw the close: issue 26's "no response within 5 s" in HTTPConnectionPoolTests).
        // `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+) is not imported: looked up by name,
        // as in Sources/BridgeDaemon/ConfigCheckProcess.swift.
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
    static func reap(_ pid: Int32) -> Int32? {
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        if rc == pid { return status }
        if rc < 0 { return -1 }  // not our child any more
        return nil
    }

    /// Blocks until `pid` has exited.
    static func wait(_ pid: Int32) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Clean stop, then start again on the same port with the same state directory.
    func restart() throws {
        stop()
        try start()
    }

    // MARK: - Ports

    /// A free 127.0.0.1 port **below the kernel's ephemeral range**. A port from that range
    /// could be picked as the local port of a client's outgoing connection while the broker is
    /// stopped (and even self-connect), and then the restarted broker cannot bind it.
    static func freePort() throws -> Int {
        let range =
            (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } ?? []
        let ephemeralLow = range.first ?? 32768
        let candidates = ephemeralLow > 12000 ? 10000..<ephemeralLow : 49152..<65536
        for _ in 0..<200 {
            let port = Int.random(in: candidates)
            if canBind(port: port) { return port }
        }
        throw TestFailure("no free port found in \(candidates)")
    }

    /// Whether 127.0.0.1:`port` can be bound right now.
    static func canBind(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return bound == 0
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return rc == 0
    }
}

/// A test-support failure with a message.
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs helper programs (openssl, mosquitto_passwd) and fails with their output.
enum Shell {
    static func run(_ executable: String, _ arguments: [String], in directory: String? = nil) throws {
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

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl for one test.
struct TestCertificates: Sendable {
    let directory: String
    var caFile: String { directory + "/ca.crt" }
    var serverCertificate: String { directory + "/server.crt" }
    var serverKey: String { directory + "/server.key" }
    var clientCertificate: String { directory + "/client.crt" }
    var clientKey: String { directory + "/client.key" }
    /// A second CA that signed nothing we use ("wrong CA").
    var otherCAFile: String { directory + "/other-ca.crt" }

    static func make(in directory: String) throws -> TestCertificates {
        let openssl = "/usr/bin/openssl"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Shell.run(
            openssl, ["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=Test CA"],
            in: directory)
        try Shell.run(
            openssl,
            ["req", "-x509"] + ec + ["-keyout", "other-ca.key", "-out", "other-ca.crt", "-days", "2", "-subj", "/CN=Other CA"],
            in: directory)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(toFile: directory + "/client.ext", atomically: true, encoding: .utf8)
        for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=test-client")] {
            try Shell.run(
                openssl, ["req"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject], in: directory)
            try Shell.run(
                openssl,
                [
                    "x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", "\(name).crt", "-days", "2", "-extfile", "\(name).ext",
                ], in: directory)
        }
        return TestCertificates(directory: directory)
    }
}
