import Foundation
import Locking
import Logging
import NIOWebSocket
import PusherLocal
import PusherProtocol
import Testing

@testable import PusherChannels

/// A raw WebSocket to pusher-local that keeps every text frame and the close code (the sign-in
/// side of ``PusherClient`` is not used here: these tests are about the HTTP API client).
private final class UserSocket: Sendable {
    struct State {
        var frames: [String] = []
        var closeCode: UInt16?
        var ended = false
    }
    let state = Locked(State())
    let outgoing: AsyncStream<String>.Continuation
    let outgoingStream: AsyncStream<String>

    init() { (outgoingStream, outgoing) = AsyncStream.makeStream(of: String.self) }

    func send(_ text: String) { outgoing.yield(text) }

    /// Waits until a received frame contains `needle`; returns it.
    func frame(containing needle: String, timeout: Duration = .seconds(5)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = state.withLock({ $0.frames.first { $0.contains(needle) } }) { return found }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw PusherHTTPError.unexpectedResponse("no frame with \(needle) in \(state.withLock { $0.frames })")
    }

    /// Waits until the server closed the connection; its close code.
    func closed(timeout: Duration = .seconds(5)) async throws -> UInt16? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let code = state.withLock({ $0.ended ? .some($0.closeCode) : nil }) { return code }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw PusherHTTPError.unexpectedResponse("not closed")
    }

    var isOpen: Bool { state.withLock { !$0.ended } }

    /// The socket id from `pusher:connection_established`.
    func socketID() async throws -> String {
        let hello = try await frame(containing: "pusher:connection_established")
        let data = try #require(JSONScanner.object(hello)["data"]?.text)
        return try #require(JSONScanner.object(data)["socket_id"]?.text)
    }
}

/// Runs `body` with an open raw WebSocket to `url`.
private func withUserSocket<T: Sendable>(_ url: String, _ body: @Sendable (UserSocket) async throws -> T) async throws -> T {
    let socket = UserSocket()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            defer { socket.state.withLock { $0.ended = true } }
            let close = try await PusherWebSocket.connect(
                url: url, configuration: .init(maxFrameSize: 1 << 20, closeTimeout: .seconds(2)), logger: Logger(label: "user-socket")
            ) { inbound, outbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { inner in
                    inner.addTask {
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            if case .text(let text) = message { socket.state.withLock { $0.frames.append(text) } }
                        }
                    }
                    inner.addTask {
                        for await text in socket.outgoingStream { try await outbound.write(.text(text)) }
                    }
                    _ = try await inner.next()
                    inner.cancelAll()
                }
            }
            socket.state.withLock { $0.closeCode = close.map { UInt16(webSocketErrorCode: $0.closeCode) } }
            return nil
        }
        let result = try await body(socket)
        socket.outgoing.finish()
        try await group.waitForAll()
        return result
    }
}

/// The HTTP API client's user calls against a real pusher-local: `authenticateUser` signs a
/// sign-in pusher-local accepts, `sendToUser` reaches the user's connections,
/// `terminateUserConnections` closes exactly them (docs/pusher-protocol.md §1, "User sign-in").
@Suite(.timeLimit(.minutes(1))) struct HTTPClientUserTests {
    static func withLocal(_ body: @Sendable (RunningPusherLocal, PusherHTTPClient) async throws -> Void) async throws {
        var logger = Logger(label: "pusher-local")
        logger.logLevel = .critical
        try await PusherLocalServer.withRunning(PusherLocalConfiguration(port: 0), logger: logger) { local in
            let pool = PusherHTTPConnectionPool(maximumConnectionsPerHost: 2)
            let client = PusherHTTPClient(
                appID: local.app.id, key: local.app.key, secret: local.app.secret, host: .host(local.host, port: local.port),
                encrypted: false, connectionPool: pool)
            do {
                try await body(local, client)
                await pool.shutdown()
            } catch {
                await pool.shutdown()
                throw error
            }
        }
    }

    /// Signs `socket` in with the client's `authenticateUser` reply, as a browser would send it,
    /// and subscribes it to its `#server-to-user-` channel.
    private static func signIn(_ socket: UserSocket, _ client: PusherHTTPClient, userID: String) async throws {
        let socketID = try await socket.socketID()
        let reply = try client.authenticateUser(socketID: socketID, userID: userID, userInfoJSON: #"{"name":"N"}"#)
        socket.send(#"{"event":"pusher:signin","data":"# + reply + "}")
        _ = try await socket.frame(containing: "pusher:signin_success")
        socket.send(##"{"event":"pusher:subscribe","data":{"channel":"#server-to-user-"## + userID + #""}}"#)
        _ = try await socket.frame(containing: "pusher_internal:subscription_succeeded")
    }

    @Test func sendToUserReachesOnlyThatUserAndTerminateClosesOnlyItsConnections() async throws {
        try await Self.withLocal { local, client in
            let url = local.webSocketURL()
            try await withUserSocket(url) { a in
                try await withUserSocket(url) { b in
                    try await withUserSocket(url) { other in
                        try await Self.signIn(a, client, userID: "user@example.com")
                        try await Self.signIn(b, client, userID: "user@example.com")
                        try await Self.signIn(other, client, userID: "someone-else")
                        try await client.sendToUser("user@example.com", event: "greeting", data: #"{"hello":"you"}"#)
                        for socket in [a, b] {
                            let frame = try await socket.frame(containing: "greeting")
                            #expect(frame.contains(##""channel":"#server-to-user-user@example.com""##))
                        }
                        try await client.terminateUserConnections("user@example.com")
                        #expect(try await a.closed() == 4009)
                        #expect(try await b.closed() == 4009)
                        try await Task.sleep(for: .milliseconds(200))
                        #expect(other.isOpen)
                        #expect(other.state.withLock { $0.frames.allSatisfy { !$0.contains("greeting") } })
                        #expect(local.stats()?.counters.connectionsTerminated == 2)
                    }
                }
            }
        }
    }

    @Test func badUserIDsAreRefusedBeforeSending() async throws {
        let client = PusherHTTPClient(appID: "1", key: "k", secret: "s", host: .host("127.0.0.1", port: 9), encrypted: false)
        for id in ["", "a b", "#x", String(repeating: "x", count: 201)] {
            await #expect(throws: PusherHTTPError.self) { try await client.sendToUser(id, event: "e", data: "{}") }
            await #expect(throws: PusherHTTPError.self) { try await client.terminateUserConnections(id) }
        }
        do {
            try await client.sendToUser("u", event: "pusher:x", data: "{}")
            Issue.record("a protocol event name was sent")
        } catch {
            #expect(error.isInvalidRequest)
        }
        do {
            try await client.sendToUser("u", event: "e", data: String(repeating: "x", count: PusherLimits.eventDataBytes + 1))
            Issue.record("oversized data was sent")
        } catch {
            #expect(error.isInvalidRequest)
        }
    }

    /// Pusher's documented sign-in example (Tests/Fixtures/pusher-signatures.json, "user_auth").
    @Test func authenticateUserMatchesThePusherDocsVector() throws {
        let client = PusherHTTPClient(appID: "1", key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8")
        let reply = try client.authenticateUser(socketID: "1234.1234", userData: #"{"id":"12345"}"#)
        #expect(
            reply
                == #"{"auth":"278d425bdf160c739803:4708d583dada6a56435fb8bc611c77c359a31eebde13337c16ab43aa6de336ba","user_data":"{\"id\":\"12345\"}"}"#
        )
        #expect(try client.authenticateUser(socketID: "1234.1234", userID: "12345") == reply)
        let watching = try client.authenticateUser(socketID: "1.2", userID: "u", userInfoJSON: #"{"a":1}"#, watchlist: ["v", "w"])
        #expect(watching.contains(#""user_data":"{\"id\":\"u\",\"user_info\":{\"a\":1},\"watchlist\":[\"v\",\"w\"]}""#))
        for (socketID, userData) in [
            ("1234", #"{"id":"1"}"#), ("1.2", "[]"), ("1.2", #"{"id":5}"#), ("1.2", #"{"id":"a b"}"#), ("1.2", "{nope"),
        ] {
            #expect(throws: PusherHTTPError.self) { try client.authenticateUser(socketID: socketID, userData: userData) }
        }
        #expect(throws: PusherHTTPError.self) { try client.authenticateUser(socketID: "1.2", userID: "u", userInfoJSON: "[1]") }
        #expect(throws: PusherHTTPError.self) { try client.authenticateUser(socketID: "1.2", userID: "u", watchlist: ["a b"]) }
    }
}
