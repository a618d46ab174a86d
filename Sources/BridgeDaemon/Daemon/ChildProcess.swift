import Locking

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One short-lived child process, run to completion with a deadline: `posix_spawn`, its stdout and
/// stderr read from one pipe, `waitpid`. Everything blocking happens on a thread of its own, so
/// the cooperative pool never waits on the child.
///
/// stdout and stderr share one pipe (in the order the child wrote them), which is read until end
/// of file while the child runs: a child that prints more than a pipe holds never blocks on a
/// full pipe while we wait for it. At the deadline the child gets SIGKILL.
struct ChildProcess: Sendable {
    /// How the child ended.
    enum Termination: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal killed it (SIGABRT from an `abort()`, SIGSEGV, SIGILL from a Swift trap, …).
        case signalled(Int32)
        /// It was still running at the deadline; it was killed with SIGKILL.
        case timedOut
        /// `posix_spawn` (or the pipe) failed with this errno; nothing ran.
        case notStarted(Int32)
        /// The thread that runs and waits for the child could not be created; nothing ran.
        case noThread
    }

    /// What the child left behind.
    struct Result: Sendable, Equatable {
        var termination: Termination
        /// What it printed on stdout and stderr, as lines (blank lines dropped); at most
        /// ``ChildProcess/maxOutputBytes`` bytes are kept.
        var output: [String]
    }

    /// The program and its arguments; `arguments[0]` is the path (no `PATH` search).
    var arguments: [String]
    /// The child's whole environment.
    var environment: [String: String]
    /// How long it may run.
    var timeout: Duration

    /// Output kept per run; the rest is read and dropped (a check prints a rule table, not megabytes).
    static let maxOutputBytes = 64 * 1024

    /// Runs the child on a dedicated thread and returns when it has ended (or been killed), or at
    /// once with ``Termination/noThread`` when that thread cannot be created.
    func run() async -> Result {
        await withCheckedContinuation { continuation in
            let started = detachThread(name: "config-check") { continuation.resume(returning: self.runBlocking()) }
            if !started { continuation.resume(returning: Result(termination: .noThread, output: [])) }
        }
    }

    /// The blocking part: spawn, read, wait. Called only on a thread of its own.
    func runBlocking() -> Result {
        let deadline = ContinuousClock.now + timeout
        let pid: pid_t
        let readEnd: Int32
        switch Self.spawnLock.withLock({ _ in spawn() }) {
        case .success(let started): (pid, readEnd) = started
        case .failure(let error): return Result(termination: .notStarted(error.code), output: [])
        }
        defer { close(readEnd) }
        var output: [UInt8] = []
        let finishedInTime = Self.readUntilEndOfFile(readEnd, into: &output, deadline: deadline)
        let termination = finishedInTime ? Self.wait(for: pid, deadline: deadline) : Self.killNow(pid)
        let lines = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map(String.init).filter { !$0.allSatisfy(\.isWhitespace) }
        return Result(termination: termination, output: lines)
    }

    /// Serializes ``spawn()``: `pipe` and `fcntl(FD_CLOEXEC)` are two steps (`pipe2` is not
    /// imported), and a child spawned in between by another run would inherit the write end and
    /// hold that run's pipe open.
    private static let spawnLock = Locked(())

    /// An errno from `pipe` or `posix_spawn`.
    struct SpawnError: Error {
        /// The errno.
        var code: Int32
    }

    /// Starts the child with stdin on /dev/null and stdout and stderr on a new pipe; returns its
    /// pid and the pipe's read end. Called with ``spawnLock`` held.
    private func spawn() -> Swift.Result<(pid_t, Int32), SpawnError> {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return .failure(SpawnError(code: errno)) }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(writeEnd) }
        // Close-on-exec, so only the dup2'd copies reach the child.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        Self.closeInheritedDescriptors(&actions)

        // The daemon's signal mask and ignored signals must not leak into the child.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        var allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            close(readEnd)
            return .failure(SpawnError(code: spawned))
        }
        return .success((pid, readEnd))
    }

    /// Adds "close every descriptor from 3 up" to `actions`, after the `dup2`s: the child gets
    /// stdin, stdout and stderr and nothing else of ours. SwiftNIO opens its sockets without
    /// close-on-exec, so without this a check child held every connection of the daemon open for
    /// as long as it ran: a connection the daemon (or its peer) closed meanwhile stayed open for
    /// the other side (issue 26: a test server's close never reached its client while a child
    /// spawned this way lived). glibc 2.34+ (Debian 12: 2.36) has
    /// `posix_spawn_file_actions_addclosefrom_np`, which Glibc does not import (it is `_GNU_SOURCE`),
    /// so it is looked up by name; without it, descriptors are inherited as before.
    static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        _ = addCloseFrom?(&actions, 3)
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// Reads until end of file; false when the deadline came first.
    private static func readUntilEndOfFile(_ fd: Int32, into output: inout [UInt8], deadline: ContinuousClock.Instant) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: left.milliseconds + 1))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return true }
            output.append(contentsOf: buffer[..<min(count, max(0, maxOutputBytes - output.count))])
        }
    }

    /// Reaps a child whose output has ended; one that lingers past the deadline is killed.
    private static func wait(for pid: pid_t, deadline: ContinuousClock.Instant) -> Termination {
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return termination(status) }
            if reaped < 0, errno != EINTR { return .notStarted(errno) }
            if ContinuousClock.now >= deadline { return killNow(pid) }
            usleep(5_000)
        }
    }

    /// SIGKILL, then reap (a killed child ends at once).
    private static func killNow(_ pid: pid_t) -> Termination {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return .timedOut
    }

    /// `WIFEXITED`/`WEXITSTATUS`/`WTERMSIG`, which Swift does not import (they are macros).
    private static func termination(_ status: Int32) -> Termination {
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    fileprivate var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
