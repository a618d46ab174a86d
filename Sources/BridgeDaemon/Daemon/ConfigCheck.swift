import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A reload's first step: `pusher-mqtt-bridge check --config FILE` in a child process, before the
/// daemon parses the file itself.
///
/// TOMLKit wraps toml++, whose assertions abort the whole process on some malformed inputs
/// (docs/history/reliability.md, "Fuzzing", findings 2, 4 and 7, each guarded one by one in the loader). In a
/// child, such a crash costs the reload, not the daemon: the old config keeps running.
public struct ConfigCheck: Sendable {
    /// The program and leading arguments; `--config FILE` is appended.
    public var command: [String]
    /// How long the check may run before it is killed and the reload refused.
    public var timeout: Duration

    /// - Parameters:
    ///   - command: the checker; the default is this very executable's `check` subcommand
    ///     (`/proc/self/exe` runs the same binary even if a package upgrade replaced the file).
    ///     Tests that run the daemon inside the test runner pass the built `pusher-mqtt-bridge`.
    ///   - timeout: 10 s by default.
    public init(command: [String] = ["/proc/self/exe", "check"], timeout: Duration = .seconds(10)) {
        self.command = command
        self.timeout = timeout
    }

    /// What the check said about a file.
    public enum Verdict: Sendable, Equatable {
        /// Exit 0: the file may be parsed in-process.
        case valid
        /// Exit 78: the file is invalid; one line per problem, as the check printed them.
        case invalid(diagnostics: [String])
        /// A signal ended the check (toml++'s `abort()` is SIGABRT); what it printed before.
        case crashed(signal: Int32, output: [String])
        /// Any other exit status, or the check could not be started (`status` is then the errno).
        case failed(status: Int32, output: [String])
        /// Still running at the deadline; it was killed.
        case timedOut
    }

    /// Runs the check on `file` with the environment variables the daemon expands `${VAR}` with,
    /// off the cooperative pool. One is added unless set: `SWIFT_BACKTRACE=enable=no`, so that a
    /// crashing check prints toml++'s one assertion line, not the Swift runtime's 60-line backtrace.
    public func verdict(on file: String, environment: [String: String]) async -> Verdict {
        var environment = environment
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        let child = ChildProcess(arguments: command + ["--config", file], environment: environment, timeout: timeout)
        let result = await child.run()
        switch result.termination {
        case .exited(0): return .valid
        case .exited(78): return .invalid(diagnostics: result.output)
        case .exited(let status): return .failed(status: status, output: result.output)
        case .notStarted(let error):
            return .failed(status: error, output: ["cannot start \(command.joined(separator: " ")): errno \(error)"])
        case .noThread:
            return .failed(status: EAGAIN, output: ["cannot start a thread to run the config check (pthread_create failed)"])
        case .signalled(let signal): return .crashed(signal: signal, output: result.output)
        case .timedOut: return .timedOut
        }
    }

    /// `6 (SIGABRT)`: a signal's number and, for the usual crash signals, its name.
    public static func describe(signal: Int32) -> String {
        let names: [Int32: String] = [
            4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM",
        ]
        return names[signal].map { "\(signal) (\($0))" } ?? "\(signal)"
    }
}

extension Daemon {
    /// Runs the ``ConfigCheck`` on the config file before a reload. On anything but exit 0 the reload
    /// is refused like an invalid file: logged, counted in `errors_total{kind="reload"}`, and the old
    /// config keeps running. Returns whether the reload may go on.
    func configCheckPasses() async -> Bool {
        let verdict = await configCheck.verdict(on: configPath, environment: environment.variables)
        let file: Logger.MetadataValue = "\(configPath)"
        let output: [String]
        switch verdict {
        case .valid:
            return true
        case .invalid(let diagnostics):
            logger.error(
                "reload refused: the new config is invalid; the old one keeps running", metadata: ["errors": "\(diagnostics.count)"])
            output = diagnostics
        case .crashed(let signal, let printed):
            logger.error(
                "reload refused: config check crashed; the old config keeps running",
                metadata: ["signal": "\(ConfigCheck.describe(signal: signal))", "file": file])
            output = printed
        case .failed(let status, let printed):
            logger.error(
                "reload refused: config check failed; the old config keeps running", metadata: ["status": "\(status)", "file": file])
            output = printed
        case .timedOut:
            logger.error(
                "reload refused: config check timed out and was killed; the old config keeps running",
                metadata: ["timeout": "\(configCheck.timeout)", "file": file])
            output = []
        }
        metrics.errors(bridge: "", kind: "reload").increment()
        for line in output { logger.error("\(line)") }
        return false
    }
}
