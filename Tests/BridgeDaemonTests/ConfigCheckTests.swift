import Foundation
import Glibc
import Locking
import Testing

@testable import BridgeDaemon

/// The child-process runner behind a reload's config check, driven with small shell commands.
@Suite struct ChildProcessTests {
    private func shell(_ script: String, timeout: Duration = .seconds(10), environment: [String: String] = ["PATH": "/usr/bin:/bin"]) async
        -> ChildProcess.Result
    {
        await ChildProcess(arguments: ["/bin/sh", "-c", script], environment: environment, timeout: timeout).run()
    }

    @Test func exitZeroWithItsOutput() async {
        let result = await shell("echo ok")
        #expect(result == ChildProcess.Result(termination: .exited(0), output: ["ok"]))
    }

    @Test func exit78KeepsEveryLineFromStdoutAndStderr() async {
        let result = await shell("echo 'a.conf:1:5: error: one' >&2; echo; echo 'a.conf:2:1: error: two'; exit 78")
        #expect(result.termination == .exited(78))
        #expect(result.output == ["a.conf:1:5: error: one", "a.conf:2:1: error: two"])
    }

    @Test func aSignalIsACrashNotAnExitStatus() async {
        let result = await shell("echo before; kill -ABRT $$")
        #expect(result.termination == .signalled(SIGABRT))
        #expect(result.output == ["before"])
    }

    @Test func aChildPastTheDeadlineIsKilled() async {
        let start = ContinuousClock.now
        // What the child printed before the deadline is kept: the deadline (2 s) leaves a loaded
        // machine time to start the shell and read its line (at 300 ms a starved `bash` could
        // print after the kill, and the line is then rightly absent).
        let result = await shell("echo started; exec sleep 120", timeout: .seconds(2))
        #expect(result.termination == .timedOut)
        #expect(result.output == ["started"])
        // Killed, not waited for: far less than the child's own 120 s. Not a tight bound on the
        // deadline: under load (CI rehearsal at load 15 on 2 cores) the reaping task was seen to
        // start 27 s late; `.timedOut` is what shows the deadline acted.
        #expect(start.duration(to: .now) < .seconds(60))
    }

    @Test func aChildThatClosesItsOutputButLingersIsKilledAtTheDeadline() async {
        let result = await shell("exec sleep 30 >&- 2>&-", timeout: .milliseconds(300))
        #expect(result.termination == .timedOut)
    }

    @Test func moreOutputThanAPipeHoldsDoesNotDeadlock() async throws {
        let result = await shell(
            "i=0; while [ $i -lt 4000 ]; do echo 'line of forty bytes, printed many times.'; i=$((i+1)); done; exit 78")
        #expect(result.termination == .exited(78))
        let kept = result.output.reduce(0) { $0 + $1.utf8.count + 1 }
        #expect(kept <= ChildProcess.maxOutputBytes + 1)
        #expect(kept > ChildProcess.maxOutputBytes - 100)
    }

    @Test func theChildGetsExactlyTheGivenEnvironment() async {
        let result = await shell("echo \"${PMB_CHECK_VAR:-unset} ${HOME:-nohome}\"", environment: ["PMB_CHECK_VAR": "x y", "PATH": "/bin"])
        #expect(result.output == ["x y nohome"])
    }

    @Test func aMissingProgramIsNotStarted() async {
        let result = await ChildProcess(arguments: ["/nonexistent/checker"], environment: [:], timeout: .seconds(5)).run()
        #expect(result.termination == .notStarted(ENOENT))
    }

    /// The child gets stdin, stdout and stderr and none of our other descriptors: SwiftNIO's
    /// sockets are not close-on-exec, and a child holding one kept that connection open after we
    /// (or the peer) closed it (issue 26).
    @Test func theChildInheritsNoSocketOfOurs() async throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socket > 2)
        defer { close(socket) }
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC == 0)
        let result = await shell("if [ -e /proc/$$/fd/\(socket) ]; then echo inherited; else echo closed; fi")
        #expect(result.output == ["closed"])
    }
}

/// How a check's end becomes a verdict on the config file.
@Suite struct ConfigCheckVerdictTests {
    /// A checker script: `sh -c SCRIPT check --config FILE`, so `$2` is the file.
    private func verdict(_ script: String, timeout: Duration = .seconds(10)) async -> ConfigCheck.Verdict {
        let check = ConfigCheck(command: ["/bin/sh", "-c", script, "check"], timeout: timeout)
        return await check.verdict(on: "/etc/bridges.conf", environment: ["PATH": "/usr/bin:/bin"])
    }

    @Test func exitZeroIsValid() async {
        #expect(await verdict("[ \"$1 $2\" = '--config /etc/bridges.conf' ] && echo rules") == .valid)
    }

    @Test func exit78IsInvalidWithTheDiagnostics() async {
        #expect(await verdict("echo \"$2:3:1: error: bad\" >&2; exit 78") == .invalid(diagnostics: ["/etc/bridges.conf:3:1: error: bad"]))
    }

    @Test func aSignalIsACrash() async {
        #expect(await verdict("echo 'Assertion failed' >&2; kill -ABRT $$") == .crashed(signal: SIGABRT, output: ["Assertion failed"]))
        #expect(ConfigCheck.describe(signal: SIGABRT) == "6 (SIGABRT)")
        #expect(ConfigCheck.describe(signal: 40) == "40")
    }

    @Test func anotherStatusIsAFailure() async {
        #expect(await verdict("echo usage >&2; exit 64") == .failed(status: 64, output: ["usage"]))
    }

    /// No thread for the check (`pthread_create` failed): the verdict comes at once, a failure that
    /// refuses the reload with its reason, instead of a reload that never ends.
    @Test func noThreadForTheCheckIsAFailure() async {
        let result = await DetachedThreadTesting.$refusesCreation.withValue(true) { await verdict("exit 0") }
        #expect(result == .failed(status: EAGAIN, output: ["cannot start a thread to run the config check (pthread_create failed)"]))
    }

    @Test func aHangIsATimeout() async {
        #expect(await verdict("exec sleep 30", timeout: .milliseconds(300)) == .timedOut)
    }

    @Test func theDefaultIsThisExecutablesCheckWithATenSecondLimit() {
        let check = ConfigCheck()
        #expect(check.command == ["/proc/self/exe", "check"])
        #expect(check.timeout == .seconds(10))
    }

    /// The built daemon next to the test bundle (`swift build --build-tests` builds both).
    static let builtDaemon: String? = {
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let path = bin.appendingPathComponent("pusher-mqtt-bridge").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    /// A file that toml++ aborts on and the loader's guards miss: a multi-line string that ends in
    /// four quotes (TOML allows up to two quotes before the closing three) hides the rest of its
    /// line from the guard, and `[}` there makes `parse_value` assert.
    static let abortingConfig = "a = { s = \"\"\"x\"\"\"\", b = [}] }\n"

    @Test(.enabled(if: builtDaemon != nil, "needs the built pusher-mqtt-bridge next to the test bundle"))
    func theRealCheckCrashesOnAnAbortingFileAndTheVerdictSaysSo() async throws {
        let daemon = try #require(Self.builtDaemon)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("abort-\(UUID().uuidString.prefix(8)).conf").path
        try Self.abortingConfig.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let verdict = await ConfigCheck(command: [daemon, "check"]).verdict(on: file, environment: [:])
        guard case .crashed(let signal, let output) = verdict else {
            Issue.record("expected a crash, got \(verdict)")
            return
        }
        #expect(signal == SIGABRT)
        // toml++'s assertion, without the Swift runtime's backtrace (SWIFT_BACKTRACE=enable=no).
        #expect(output.count == 1)
        #expect(output.first?.contains("Assertion") == true)
    }
}
