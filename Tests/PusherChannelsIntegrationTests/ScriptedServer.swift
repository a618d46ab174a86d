import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Locking
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NIOWebSocket
import TestSupport
import Testing

@testable import PusherChannels

/// One accepted WebSocket connection of the scripted server; the test script plays Pusher.
struct ScriptedConnection {
    /// 0 for the first connection the client made, 1 for the next, …
    let index: Int
    /// The request path and query, e.g. `/app/key?protocol=7&…`.
    let path: String
    let outbound: WebSocketOutboundWriter
    var messages: WebSocketInboundMessageStream.AsyncIterator

    func send(_ text: String) async throws {
        try await outbound.write(.text(text))
    }

    func send(_ frame: PusherFrame) async throws {
        try await send(frame.serverText)
    }

    func sendEstablished(socketID: String, activityTimeout: Int = 120) async throws {
        try await send(
            PusherFrame(
                event: "pusher:connection_established",
                data: #"{"socket_id":"\#(socketID)","activity_timeout":\#(activityTimeout)}"#
            )
        )
    }

    /// The next text frame from the client, decoded; `nil` when the client closed.
    mutating func receive() async throws -> PusherFrame? {
        while let message = try await messages.next() {
            if case .text(let text) = message { return try PusherFrame.parse(text) }
        }
        return nil
    }

    /// The next frame's `data` object fields (client → server data is an object).
    static func fields(_ frame: PusherFrame?) -> [String: String] {
        guard let data = frame?.data, let members = try? JSONScanner.object(data) else { return [:] }
        return members.compactMapValues(\.text)
    }

    func close(code: UInt16, reason: String? = nil) async throws {
        try await outbound.close(.init(codeNumber: Int(code)), reason: reason)
    }
}

/// Problems the server script found; checked by the test after the client side ran.
final class ScriptLog: Sendable {
    private let problems = Locked<[String]>([])
    private let connections = Locked(0)

    func record(_ problem: String) { problems.withLock { $0.append(problem) } }
    var recorded: [String] { problems.withLock { $0 } }
    func nextIndex() -> Int {
        connections.withLock { count in
            defer { count += 1 }
            return count
        }
    }
    var connectionCount: Int { connections.withLock { $0 } }
}

/// A temp dir with a test CA and a server certificate for `localhost`/127.0.0.1, made with the
/// `openssl` CLI.
struct TestCertificates {
    let directory: URL
    var caFile: String { directory.appendingPathComponent("ca.pem").path }
    var certificateFile: String { directory.appendingPathComponent("server.pem").path }
    var keyFile: String { directory.appendingPathComponent("server.key").path }

    static func make() async throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pusher-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = """
            set -e
            cd "\(directory.path)"
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 1 -subj "/CN=pusher-mqtt-bridge test CA" 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
            printf "subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n" > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile ext.cnf 2>/dev/null
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        // Wait without blocking a cooperative thread (waitUntilExit would, and with two cores
        // that can stall every other test).
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        guard status == 0 else {
            throw TestFailure("openssl failed with status \(status)")
        }
        return TestCertificates(directory: directory)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    func serverTLS() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
        )
    }
}

/// Runs a WebSocket server on 127.0.0.1 (a free port) whose every connection is played by
/// `script`, then runs `test` with the port; the server is shut down when `test` returns or throws.
/// It runs on `eventLoopGroup` (NIO's shared one unless a test brings its own).
func withScriptedPusherServer(
    tls: TLSConfiguration? = nil,
    eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    log: ScriptLog,
    routes: (Router<BasicRequestContext>) -> Void = { _ in },
    script: @escaping @Sendable (inout ScriptedConnection) async throws -> Void,
    test: @Sendable (Int) async throws -> Void
) async throws {
    let router = Router()
    routes(router)
    let webSocket = HTTPServerBuilder.http1WebSocketUpgrade(
        configuration: .init(ws: .init(maxFrameSize: 1 << 20))
    ) { request, _, _ in
        let path = request.path ?? ""
        guard path.hasPrefix("/app/") else { return .dontUpgrade }
        return .upgrade([:]) { inbound, outbound, _ in
            var connection = ScriptedConnection(
                index: log.nextIndex(),
                path: path,
                outbound: outbound,
                messages: inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
            )
            do {
                try await script(&connection)
            } catch is CancellationError {
            } catch {
                log.record("script of connection \(connection.index) threw: \(error)")
            }
        }
    }
    let server: HTTPServerBuilder
    if let tls {
        server = try HTTPServerBuilder.tls(webSocket, tlsConfiguration: tls)
    } else {
        server = webSocket
    }
    let port = Locked<Int?>(nil)
    let (running, runningContinuation) = AsyncStream.makeStream(of: Int.self)
    var logger = Logger(label: "scripted-pusher-server")
    logger.logLevel = .critical
    let app = Application(
        router: router,
        server: server,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            let bound = channel.localAddress?.port ?? 0
            port.withLock { $0 = bound }
            runningContinuation.yield(bound)
            runningContinuation.finish()
        },
        eventLoopGroupProvider: .shared(eventLoopGroup),
        logger: logger
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        var iterator = running.makeAsyncIterator()
        guard let bound = await iterator.next(), bound > 0 else { throw TestFailure("server did not start") }
        defer { group.cancelAll() }
        try await test(bound)
    }
}

/// Runs `body` and fails if it takes longer than `seconds` (× `testTimeScale`: under TSan whole
/// seconds of stall were seen while both cores ran other tests).
///
/// On a timeout `body` is cancelled but not waited for: a body that ignores cancellation (a
/// defect) leaves its task behind and the test fails with this message instead of hanging the
/// whole test run (a task group would wait for it for ever).
func withTimeout<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let seconds = seconds * testTimeScale
    let race = FirstOutcome<T>()
    let work = Task { race.settle(await outcome(of: body)) }
    let timer = Task {
        guard (try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))) != nil else { return }
        race.settle(.failure(TestFailure("timed out after \(seconds) s waiting for \(what)")))
    }
    let first = await withTaskCancellationHandler {
        await race.outcome()
    } onCancel: {
        race.settle(.failure(CancellationError()))
    }
    work.cancel()
    timer.cancel()
    return try first.get()
}

/// The first of several outcomes racing each other (``withTimeout(_:_:_:)``): later ones are ignored.
final class FirstOutcome<T: Sendable>: Sendable {
    private struct State {
        var outcome: Result<T, any Error>?
        var waiter: CheckedContinuation<Result<T, any Error>, Never>?
    }
    private let state = Locked(State())

    func settle(_ outcome: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<T, any Error>, Never>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func outcome() async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<T, any Error>? in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// What `body` returned or threw.
func outcome<T>(of body: () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

/// Polls `condition` every 5 ms until it holds; fails after `seconds` (× `testTimeScale`). Generous
/// on purpose: under `make test` on 2 cores, beside a soak, a 2 s wait for a 100 ms idle close once ran
/// out. A passing test never waits it out.
func waitUntil(_ what: String, seconds: Double = 15, _ condition: @escaping @Sendable () -> Bool) async throws {
    try await withTimeout(seconds, what) {
        while !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }
}

/// Runs a client (its `run()` in a task of its own) for the duration of `body`, then cancels it
/// and waits for `run()` to return — at most 10 s (× `testTimeScale`): a client that cannot be
/// stopped (a defect: the bridge could not stop either) fails the test instead of hanging the run.
func withRunningClient(_ client: PusherClient, _ body: @Sendable (PusherClient) async throws -> Void) async throws {
    let running = Task { try await client.run() }
    let result = await outcome { try await body(client) }
    running.cancel()
    try await withTimeout(10, "client.run() to return after being cancelled") {
        _ = await running.result
    }
    try result.get()
}

/// Collects updates until `predicate` says stop; returns all collected. The default wait is
/// generous on purpose: when `make test` starts, all 373 tests share 2 cores and every test
/// waited ~4 s in one CI rehearsal (a 5 s wait failed there). A passing test never waits it out.
func collect(
    _ updates: AsyncStream<PusherUpdate>,
    seconds: Double = 15,
    _ what: String,
    until predicate: @escaping @Sendable ([PusherUpdate]) -> Bool
) async throws -> [PusherUpdate] {
    try await withTimeout(seconds, what) {
        var seen: [PusherUpdate] = []
        for await update in updates {
            seen.append(update)
            if predicate(seen) { return seen }
        }
        throw TestFailure("update stream ended while waiting for \(what); saw \(seen)")
    }
}

/// How much slower than normal this test run is allowed to be: `scripts/tsan.sh` sets
/// `PUSHER_MQTT_BRIDGE_TEST_TIME_SCALE=4` (ThreadSanitizer runs everything several times slower);
/// 1 otherwise. Only tests that bound elapsed wall-clock time use it.
let testTimeScale: Double = {
    guard let text = ProcessInfo.processInfo.environment["PUSHER_MQTT_BRIDGE_TEST_TIME_SCALE"], let value = Double(text), value >= 1
    else { return 1 }
    return value
}()
