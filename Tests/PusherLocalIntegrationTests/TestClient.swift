import AsyncHTTPClient
import Foundation
import Locking
import Logging
import NIOCore
import NIOSSL
import NIOWebSocket
import PusherChannels
import PusherLocal
import PusherProtocol
import TestSupport
import Testing
import WSCore

/// Errors of the scripted test client.
enum TestClientError: Error, CustomStringConvertible {
    case timeout(String)
    case closed
    var description: String {
        switch self {
        case .timeout(let what): "timed out waiting for \(what)"
        case .closed: "connection closed"
        }
    }
}

/// A scripted WebSocket client for integration tests: everything received is kept in order;
/// `next` waits (with a timeout) for the next frame; `send` writes a text frame.
final class TestSocket: Sendable {
    struct State {
        var frames: [String] = []
        var cursor = 0
        var ended = false
        var closeCode: UInt16?
        var closeReason: String?
    }

    let state = Locked(State())
    let outgoing: AsyncStream<String>.Continuation
    let outgoingStream: AsyncStream<String>

    init() {
        (outgoingStream, outgoing) = AsyncStream.makeStream(of: String.self)
    }

    func send(_ text: String) { outgoing.yield(text) }

    /// The next received text frame.
    func next(timeout: Duration = .seconds(5)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            let result: String?? = state.withLock { state in
                if state.cursor < state.frames.count {
                    state.cursor += 1
                    return .some(state.frames[state.cursor - 1])
                }
                return state.ended ? .some(nil) : nil
            }
            if let result {
                guard let frame = result else { throw TestClientError.closed }
                return frame
            }
            if ContinuousClock.now > deadline { throw TestClientError.timeout("a frame") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// The next frame, parsed.
    func nextEvent(timeout: Duration = .seconds(5)) async throws -> ReceivedEvent {
        let text = try await next(timeout: timeout)
        return try ReceivedEvent(text)
    }

    /// Skips frames until one with `event` arrives.
    func waitFor(_ event: String, timeout: Duration = .seconds(5)) async throws -> ReceivedEvent {
        let deadline = ContinuousClock.now + timeout
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw TestClientError.timeout(event) }
            let received = try await nextEvent(timeout: remaining)
            if received.event == event { return received }
        }
    }

    /// Asserts no frame arrives for `duration` (for "not echoed"/"excluded" checks).
    func expectSilence(for duration: Duration = .milliseconds(300)) async throws -> String? {
        do {
            return try await next(timeout: duration)
        } catch TestClientError.timeout {
            return nil
        }
    }

    /// Waits until the server closed the connection; returns the close code.
    func closeCode(timeout: Duration = .seconds(5)) async throws -> UInt16? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let (ended, code) = state.withLock { ($0.ended, $0.closeCode) }
            if ended { return code }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw TestClientError.timeout("close")
    }
}

/// One received frame, decoded the way a Pusher client decodes it.
struct ReceivedEvent {
    let raw: String
    let object: [String: Any]

    init(_ text: String) throws {
        raw = text
        object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    var event: String? { object["event"] as? String }
    var channel: String? { object["channel"] as? String }
    var userID: String? { object["user_id"] as? String }
    /// `data` as sent: a string for channel events (double encoding).
    var dataString: String? { object["data"] as? String }
    /// `data` decoded from its string (or taken as an object).
    var data: [String: Any]? {
        if let string = object["data"] as? String {
            return (try? JSONSerialization.jsonObject(with: Data(string.utf8))) as? [String: Any]
        }
        return object["data"] as? [String: Any]
    }
}

/// Runs `body` with a connected socket to `url`; the socket closes when `body` returns.
/// With `tls`, a `wss://` URL is verified against it.
func withSocket<T: Sendable>(
    _ url: String, autoPing: Duration? = nil, tls: TLSConfiguration? = nil, _ body: @Sendable (TestSocket) async throws -> T
) async throws -> T {
    let socket = TestSocket()
    let logger = {
        var logger = Logger(label: "test-client")
        if ProcessInfo.processInfo.environment["TEST_CLIENT_TRACE"] != nil { logger.logLevel = .trace }
        return logger
    }()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            defer { socket.state.withLock { $0.ended = true } }
            // PusherChannels' WebSocket connection (swift-websocket's own client loses a close that
            // arrives with the 101 response: Sources/PusherChannels/README.md).
            let close = try await PusherWebSocket.connect(
                url: url,
                configuration: .init(
                    maxFrameSize: 1 << 20,
                    closeTimeout: .seconds(2),
                    autoPing: autoPing.map { .enabled(timePeriod: $0) } ?? .disabled
                ),
                tlsConfiguration: tls,
                logger: logger
            ) { inbound, outbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { inner in
                    inner.addTask {
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            if case .text(let text) = message {
                                socket.state.withLock { $0.frames.append(text) }
                            }
                        }
                    }
                    inner.addTask {
                        for await text in socket.outgoingStream {
                            try await outbound.write(.text(text))
                        }
                    }
                    // Done when the server closed (reader ends) or the test finished (writer ends).
                    _ = try await inner.next()
                    inner.cancelAll()
                }
            }
            socket.state.withLock { state in
                if let close {
                    state.closeCode = UInt16(webSocketErrorCode: close.closeCode)
                    state.closeReason = close.reason
                }
            }
            return nil
        }
        let result = try await body(socket)
        socket.outgoing.finish()
        try await group.waitForAll()
        return result
    }
}

/// Connects and reads `connection_established`; returns the socket id.
func establish(_ socket: TestSocket) async throws -> String {
    let hello = try await socket.nextEvent()
    #expect(hello.event == "pusher:connection_established")
    return try #require(hello.data?["socket_id"] as? String)
}

/// Runs pusher-local in-process for one test, logging only warnings and errors.
func withServer<T: Sendable>(_ configuration: PusherLocalConfiguration, _ body: @Sendable (RunningPusherLocal) async throws -> T)
    async throws -> T
{
    var logger = Logger(label: "pusher-local-test")
    logger.logLevel = ProcessInfo.processInfo.environment["TEST_CLIENT_TRACE"] != nil ? .trace : .warning
    return try await PusherLocalServer.withRunning(configuration, logger: logger, body)
}

/// Runs `body` on a fresh server until one try is judged, at most `tries` times. `body` returns
/// nil once it has judged the try (its expectations made); it returns what it saw instead when a
/// loaded machine did its part too late for the try to mean anything (a pong or a sign-in after
/// the server's deadline, which the server rightly answers with a close). A server that is wrong
/// fails every try: that is recorded, with what each try saw.
func withFreshServerUntilJudged<Late: Sendable>(
    _ configuration: PusherLocalConfiguration, tries: Int = 5, _ failure: String,
    _ body: @Sendable (RunningPusherLocal) async throws -> Late?
) async throws {
    var late: [Late] = []
    for _ in 0..<tries {
        guard let seen = try await withServer(configuration, body) else { return }
        late.append(seen)
    }
    Issue.record("\(failure) in \(tries) tries: \(late)")
}

/// A test configuration on a free port with short timeouts.
func testConfiguration(activity: Int = 120, pong: Int = 30, webhook: String? = nil) -> PusherLocalConfiguration {
    PusherLocalConfiguration(
        host: "127.0.0.1",
        port: 0,
        apps: [.demo, PusherLocalApp(id: "2", key: "other-key", secret: "other-secret")],
        activityTimeout: .seconds(activity),
        pongTimeout: .seconds(pong),
        webhookURL: webhook
    )
}

/// A signed HTTP API request, as the official server libraries make it.
func apiRequest(
    _ running: RunningPusherLocal,
    method: String,
    path: String,
    params: [(String, String)] = [],
    body: String? = nil,
    secret: String? = nil,
    timestamp: Int? = nil,
    client: HTTPClient = .shared
) async throws -> (status: Int, body: String) {
    let app = running.app
    let signature = RequestSignature(key: app.key, secret: secret ?? app.secret)
    let bytes = body.map { Array($0.utf8) }
    let signed = signature.signedParameters(
        method: method,
        path: path,
        params: params,
        body: bytes,
        timestamp: timestamp ?? Int(Date().timeIntervalSince1970)
    )
    let query = signed.map { $0.0 + "=" + ($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.1) }.joined(
        separator: "&")
    return try await rawRequest(running, method: method, target: path + "?" + query, body: body, client: client)
}

/// An unsigned HTTP request (through `client`, e.g. one that trusts a test CA).
func rawRequest(_ running: RunningPusherLocal, method: String, target: String, body: String? = nil, client: HTTPClient = .shared)
    async throws -> (status: Int, body: String)
{
    var request = HTTPClientRequest(url: running.httpURL + target)
    request.method = .init(rawValue: method)
    if let body {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
    }
    let response = try await client.execute(request, timeout: .seconds(10))
    let buffer = try await response.body.collect(upTo: 1 << 20)
    return (Int(response.status.code), String(buffer: buffer))
}

/// Subscribes `socket` to `channel` (signing private/presence with the demo secret) and waits
/// for `pusher_internal:subscription_succeeded`.
@discardableResult
func subscribe(_ socket: TestSocket, socketID: String, channel: String, userID: String? = nil, app: PusherLocalApp = .demo) async throws
    -> ReceivedEvent
{
    socket.send(subscribeFrame(socketID: socketID, channel: channel, userID: userID, app: app))
    return try await socket.waitFor("pusher_internal:subscription_succeeded")
}
