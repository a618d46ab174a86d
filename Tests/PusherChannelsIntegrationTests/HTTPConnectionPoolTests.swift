import Foundation
import Locking
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PusherLocal
import Testing

@testable import PusherChannels

#if canImport(Glibc)
    import Glibc
#endif

private let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

/// Sends a POST with a small JSON body through `pool`.
private func post(
    _ pool: PusherHTTPConnectionPool, _ endpoint: PusherHTTPEndpoint, timeout: Duration = .seconds(5 * testTimeScale)
) async throws(PusherHTTPError) -> PusherHTTPResponse {
    try await pool.execute(
        PusherHTTPRequest(method: .POST, target: "/apps/3/batch_events?x=1", body: #"{"é":1}"#), to: endpoint, timeout: timeout)
}

/// Runs `body` with a pool of this test only, shut down afterwards.
/// The pools' own event loop, not the process-wide singleton: the suites beside these (pusher-local
/// throughput, the clients' tests) keep the singleton's loops busy, and on 2 loaded cores a loop
/// stalled for seconds let the 5 s request deadline fire before the scripted server's close was
/// read (`aFreshConnectionClosedWithoutAnswerIsNotRetried`: "no response within 5 s", issue 26).
/// These tests are about the pool's decisions, which a shared loop's load must not decide.
let poolTestLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)

private func withPool<T>(
    maximumConnectionsPerHost: Int = 4, maximumBodyBytes: Int = PusherHTTPConnectionPool.maximumBodyBytes,
    _ body: (PusherHTTPConnectionPool) async throws -> T
) async throws -> T {
    let pool = PusherHTTPConnectionPool(
        maximumConnectionsPerHost: maximumConnectionsPerHost, eventLoopGroup: poolTestLoops, maximumBodyBytes: maximumBodyBytes)
    do {
        let result = try await body(pool)
        await pool.shutdown()
        return result
    } catch {
        await pool.shutdown()
        throw error
    }
}

/// The failure's message, for `#expect(… .contains(…))`.
private func failure(_ operation: () async throws(PusherHTTPError) -> PusherHTTPResponse) async -> String {
    do {
        let response = try await operation()
        return "no error: \(response.status) \(response.text)"
    } catch {
        #expect(error.isRetryable)
        return error.message
    }
}

/// ``PusherHTTPConnectionPool`` against a scripted server on a real socket (issue 16).
@Suite(.timeLimit(.minutes(1))) struct HTTPConnectionPoolTests {
    @Test func sequentialRequestsReuseOneKeepAliveConnection() async throws {
        try await ScriptedHTTPServer.with({ _ in .send(ok) }) { server, endpoint async throws in
            try await withPool { pool async throws in
                for _ in 0..<200 {
                    let response = try await post(pool, endpoint)
                    #expect(response.status == 200 && response.text == "ok")
                }
            }
            #expect(server.connections == 1)
            #expect(server.requests.count == 200)
            let first = try #require(server.requests.first)
            let lines = first.head.split(separator: "\r\n").map { $0.lowercased() }
            #expect(lines.first == "post /apps/3/batch_events?x=1 http/1.1")
            #expect(lines.contains("host: 127.0.0.1:\(endpoint.port)"))
            #expect(lines.contains("content-type: application/json"))
            #expect(lines.contains("content-length: \(#"{"é":1}"#.utf8.count)"))
            #expect(!lines.contains { $0.hasPrefix("connection:") })
            #expect(first.body == Array(#"{"é":1}"#.utf8))
        }
    }

    @Test func concurrentRequestsOpenAtMostTheLimitAndAllComplete() async throws {
        try await ScriptedHTTPServer.with({ _ in .sendAfter(.milliseconds(20), ok) }) { server, endpoint async throws in
            try await withPool(maximumConnectionsPerHost: 3) { pool async throws in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    // Not a test of the timeout: 40 requests through 3 connections missed the
                    // default 5 s on a starved machine (12 busy processes on 2 cores).
                    for _ in 0..<40 { group.addTask { try await post(pool, endpoint, timeout: .seconds(30)).status } }
                    var statuses: [Int] = []
                    for try await status in group { statuses.append(status) }
                    #expect(statuses == Array(repeating: 200, count: 40))
                }
            }
            #expect(server.connections <= 3)
            #expect(server.connections >= 2)
        }
    }

    @Test(arguments: [
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ])
    func connectionCloseOrHTTP10ReplyMeansANewConnectionForTheNextRequest(reply: String) async throws {
        try await ScriptedHTTPServer.with({ _ in .send(reply) }) { server, endpoint async throws in
            try await withPool { pool async throws in
                #expect(try await post(pool, endpoint).text == "ok")
                #expect(try await post(pool, endpoint).text == "ok")
            }
            #expect(server.connections == 2)
            #expect(server.requests.map(\.index) == [0, 0])
        }
    }

    @Test func anIdleConnectionTheServerClosedIsNotHandedOut() async throws {
        try await ScriptedHTTPServer.with({ _ in .send(ok, close: true) }) { server, endpoint async throws in
            try await withPool { pool async throws in
                #expect(try await post(pool, endpoint).text == "ok")
                // Wait until the server's close has reached the client (the pool sees it as inactive).
                try await waitUntil("the connection closed") { server.closedConnections >= 1 }
                try await Task.sleep(for: .milliseconds(50))
                #expect(try await post(pool, endpoint).text == "ok")
            }
            #expect(server.connections == 2)
            #expect(server.requests.map(\.index) == [0, 0])
        }
    }

    @Test func anIdleConnectionIsClosedAfterTheIdleTimeout() async throws {
        try await ScriptedHTTPServer.with({ _ in .send(ok) }) { server, endpoint async throws in
            let pool = PusherHTTPConnectionPool(
                maximumConnectionsPerHost: 2, idleTimeout: .milliseconds(100), eventLoopGroup: poolTestLoops)
            #expect(try await post(pool, endpoint).text == "ok")
            try await waitUntil("the connection closed") { server.closedConnections >= 1 }
            #expect(server.closedConnections == 1)
            #expect(try await post(pool, endpoint).text == "ok")
            await pool.shutdown()
            #expect(server.connections == 2)
        }
    }

    @Test func aReusedConnectionClosedAsTheRequestWentOutIsRetriedOnceOnAFreshOne() async throws {
        // The second request on connection 0 is read and the connection closed without an answer.
        let script: @Sendable (ScriptedRequest) -> ScriptedReply = { request in
            request.connection == 0 && request.index == 1 ? .closeWithoutAnswer : .send(ok)
        }
        try await ScriptedHTTPServer.with(script) { server, endpoint async throws in
            try await withPool { pool async throws in
                #expect(try await post(pool, endpoint).text == "ok")
                #expect(try await post(pool, endpoint).text == "ok")
            }
            #expect(server.connections == 2)
            #expect(server.requests.map { [$0.connection, $0.index] } == [[0, 0], [0, 1], [1, 0]])
        }
    }

    @Test func aFreshConnectionClosedWithoutAnswerIsNotRetried() async throws {
        try await ScriptedHTTPServer.with({ _ in .closeWithoutAnswer }) { server, endpoint async throws in
            let message = try await withPool { pool in await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint) }
            }
            #expect(message == "HTTP request failed: the server closed the connection before answering")
            #expect(server.connections == 1)
        }
    }

    @Test func chunkedBodiesAreReassembledAndTheConnectionKept() async throws {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        try await ScriptedHTTPServer.with({ _ in .send(chunked) }) { server, endpoint async throws in
            try await withPool { pool async throws in
                #expect(try await post(pool, endpoint).text == "hello world")
                #expect(try await post(pool, endpoint).text == "hello world")
            }
            #expect(server.connections == 1)
        }
    }

    /// With a limit of 64 KiB: 16 MiB bodies (the default limit) took over 5 s in a debug build on
    /// a loaded machine and failed the request's deadline instead of the size check.
    @Test func aBodyOfExactlyTheLimitIsReadAndOneByteMoreFails() async throws {
        #expect(PusherHTTPConnectionPool.maximumBodyBytes == 16 << 20)
        #expect(PusherHTTPConnectionPool(maximumConnectionsPerHost: 1).maximumBodyBytes == 16 << 20)
        let limit = 64 << 10
        let script: @Sendable (ScriptedRequest) -> ScriptedReply = { request in
            let size = request.connection == 0 ? limit : limit + 1
            return .send("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: "x", count: size))
        }
        try await ScriptedHTTPServer.with(script) { server, endpoint async throws in
            try await withPool(maximumBodyBytes: limit) { pool async throws in
                #expect(try await post(pool, endpoint).body.readableBytes == limit)
                // The next request must use a new connection, so the first is closed from here.
                await pool.shutdown()
                let message = await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint) }
                #expect(message == "HTTP request failed: response body over 64 KiB")
            }
            #expect(server.connections == 2)
        }
    }

    @Test(arguments: [
        "HTTP/1.1 abc OK\r\n\r\n", "hello\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        // Found by the http-response fuzz target: the parser takes a two-digit status.
        "HTTP/1.1 020 OK\r\nContent-Length: 0\r\n\r\n",
    ])
    func aMalformedReplyFailsClearly(reply: String) async throws {
        try await ScriptedHTTPServer.with({ _ in .send(reply) }) { _, endpoint in
            let message = try await withPool { pool in await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint) }
            }
            #expect(message.hasPrefix("HTTP request failed: malformed HTTP response: "))
        }
    }

    @Test func aServerThatNeverAnswersTimesOutAndTheConnectionIsClosed() async throws {
        try await ScriptedHTTPServer.with({ _ in .silence }) { server, endpoint async throws in
            // The request alone is timed: making and shutting down the pool are not its timeout's
            // business (under load they took seconds: CI rehearsal g of issue 26's series).
            let (message, elapsed) = try await withPool { pool async throws in
                let start = ContinuousClock.now
                let message = await failure { () async throws(PusherHTTPError) in
                    try await post(pool, endpoint, timeout: .milliseconds(300))
                }
                return (message, ContinuousClock.now - start)
            }
            #expect(message == "HTTP request failed: no response within 300 ms")
            #expect(elapsed >= .milliseconds(290) && elapsed < .seconds(3 * testTimeScale))
            try await waitUntil("the connection closed") { server.closedConnections >= 1 }
            #expect(server.closedConnections == 1)
        }
    }

    @Test func aRequestWaitingForAFullPoolTimesOutAndTheNextGetsTheFreedSlot() async throws {
        let script: @Sendable (ScriptedRequest) -> ScriptedReply = { request in request.connection == 0 ? .silence : .send(ok) }
        try await ScriptedHTTPServer.with(script) { server, endpoint async throws in
            try await withPool(maximumConnectionsPerHost: 1) { pool async throws in
                // The first request holds the pool's one connection (the server never answers it)
                // until its 5 s timeout; the second is sent once the server has the first, not after
                // a fixed sleep (under load the first had not been sent 100 ms later, and the second
                // took the connection: two CI rehearsals of issue 26's series failed so). 5 s, not
                // less: the second must start waiting before the first lets the connection go, and
                // a loaded machine can take seconds between the two.
                async let stuck = failure { () async throws(PusherHTTPError) in try await post(pool, endpoint, timeout: .seconds(5)) }
                try await waitUntil("the first request at the server") { !server.requests.isEmpty }
                let waiting = await failure { () async throws(PusherHTTPError) in
                    try await post(pool, endpoint, timeout: .milliseconds(100))
                }
                #expect(waiting == "HTTP request failed: no connection to \(endpoint) free within 100 ms")
                #expect(await stuck == "HTTP request failed: no response within 5 s")
                #expect(try await post(pool, endpoint).text == "ok")
            }
            #expect(server.connections == 2)
        }
    }

    @Test func aCancelledRequestEndsAtOnceAndClosesItsConnection() async throws {
        try await ScriptedHTTPServer.with({ _ in .silence }) { server, endpoint async throws in
            try await withPool { pool async throws in
                let start = ContinuousClock.now
                let request = Task {
                    await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint, timeout: .seconds(30)) }
                }
                try await waitUntil("the request read") { !server.requests.isEmpty }
                request.cancel()
                // A request that ignored the cancel would end with its timeout's message, at 30 s;
                // the bound only says "long before that" (a starved machine took 5.2 s here).
                #expect(await request.value == "HTTP request failed: the request was cancelled")
                #expect(ContinuousClock.now - start < .seconds(20 * testTimeScale))
            }
            try await waitUntil("the connection closed") { server.closedConnections >= 1 }
            #expect(server.closedConnections == 1)
        }
    }

    @Test func aRequestWaitingForAFullPoolEndsAtOnceWhenCancelled() async throws {
        let script: @Sendable (ScriptedRequest) -> ScriptedReply = { request in request.connection == 0 ? .silence : .send(ok) }
        try await ScriptedHTTPServer.with(script) { server, endpoint async throws in
            try await withPool(maximumConnectionsPerHost: 1) { pool async throws in
                // The first request holds the one connection for 10 s: a waiting request that
                // ended only when the connection came free would take that long, far over the
                // bound below, which leaves a loaded machine seconds to run the cancellation.
                async let stuck = failure { () async throws(PusherHTTPError) in try await post(pool, endpoint, timeout: .seconds(10)) }
                try await waitUntil("the request read") { !server.requests.isEmpty }
                let start = ContinuousClock.now
                let waiting = Task {
                    await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint, timeout: .seconds(30)) }
                }
                try await Task.sleep(for: .milliseconds(50))
                waiting.cancel()
                #expect(await waiting.value == "HTTP request failed: the request was cancelled")
                #expect(ContinuousClock.now - start < .seconds(5 * testTimeScale))
                #expect(await stuck == "HTTP request failed: no response within 10 s")
                #expect(try await post(pool, endpoint).text == "ok")
            }
            #expect(server.connections == 2)
        }
    }

    @Test(arguments: [
        ("https://auth.example.com/pusher/auth", "auth.example.com", 443, true, "/pusher/auth"),
        ("http://127.0.0.1:8080/a?b=c#frag", "127.0.0.1", 8080, false, "/a?b=c"),
        ("HTTP://host", "host", 80, false, "/"),
        ("http://host?x=1", "host", 80, false, "/?x=1"),
        ("https://[::1]:9443/auth", "::1", 9443, true, "/auth"),
    ])
    func authEndpointURLsSplitIntoEndpointAndTarget(url: String, host: String, port: Int, secure: Bool, target: String) throws {
        let split = try #require(PusherHTTPEndpoint.split(url: url))
        #expect(split.endpoint == PusherHTTPEndpoint(host: host, port: port, secure: secure))
        #expect(split.target == target)
        #expect(split.endpoint.hostHeader == (host.contains(":") ? "[\(host)]" : host) + (port == (secure ? 443 : 80) ? "" : ":\(port)"))
    }

    @Test(arguments: [
        "ftp://host/x", "host/x", "http://", "http://:80/x", "http://host:0/", "http://host:65536/", "http://host:x/",
        "http://user:pw@host/", "http://[::1/", "http://[::1]x/",
    ])
    func badAuthEndpointURLsAreRefused(url: String) {
        #expect(PusherHTTPEndpoint.split(url: url) == nil)
    }

    @Test func aServerThatNeverCompletesTheTLSHandshakeTimesOut() async throws {
        try await ScriptedHTTPServer.with({ _ in .silence }) { server, plain async throws in
            let endpoint = PusherHTTPEndpoint(host: plain.host, port: plain.port, secure: true)
            let message = try await withPool { pool async throws in
                // The deadline covers the TCP connect too: it must leave the connect room to finish
                // on a loaded machine (with 300 ms, 5 runs in 30 at load 8-11 ended in the connect
                // phase, "no connection … within 300 ms"), so that what times out is the handshake.
                await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint, timeout: .seconds(2)) }
            }
            #expect(message == "HTTP request failed: no TLS handshake with 127.0.0.1 within 2 s")
            #expect(server.requests.isEmpty)
            try await waitUntil("the connection closed") { server.closedConnections >= 1 }
            #expect(server.closedConnections == 1)
        }
    }

    @Test func aRefusedConnectionSaysSo() async throws {
        // A port bound but not listening, and held while the test runs: connecting is refused, and
        // no test running beside this one can be given the port (a port that was listening and is
        // closed again can be, and then the connection reaches that test's server).
        let socket = try BoundPort()
        defer { socket.close() }
        let endpoint = PusherHTTPEndpoint(host: "127.0.0.1", port: socket.port, secure: false)
        let message = try await withPool { pool in await failure { () async throws(PusherHTTPError) in try await post(pool, endpoint) } }
        #expect(message == "HTTP request failed: connection refused to 127.0.0.1:\(socket.port)")
    }

    @Test func httpsTrustsTheCAFileAndRefusesAnotherCA() async throws {
        let certificates = try await TestCertificates.make()
        let otherCertificates = try await TestCertificates.make()
        defer {
            certificates.remove()
            otherCertificates.remove()
        }
        var configuration = PusherLocalConfiguration(port: 0)
        configuration.tls = try PusherLocalTLS.load(certificateFile: certificates.certificateFile, keyFile: certificates.keyFile)
        try await PusherLocalServer.withRunning(configuration, logger: PusherLocalIntegrationTests.quiet("pusher-local")) { local in
            try await withPool { pool async throws in
                for host in ["localhost", "127.0.0.1"] {
                    let api = PusherHTTPClient(
                        appID: local.app.id, key: local.app.key, secret: local.app.secret, host: .host(host, port: local.port),
                        caFile: certificates.caFile, timeout: .seconds(5 * testTimeScale), connectionPool: pool)
                    try await api.trigger(channels: ["news"], event: "update", data: "over https")
                    try await api.trigger(channels: ["news"], event: "update", data: "again")
                }
                let untrusted = PusherHTTPClient(
                    appID: local.app.id, key: local.app.key, secret: local.app.secret, host: .host("localhost", port: local.port),
                    caFile: otherCertificates.caFile, timeout: .seconds(5 * testTimeScale), connectionPool: pool)
                let error = await #expect(throws: PusherHTTPError.self) {
                    try await untrusted.trigger(channels: ["news"], event: "update", data: "untrusted")
                }
                #expect(error?.message.hasPrefix("HTTP request failed: TLS handshake with localhost failed: ") == true)
                let missing = PusherHTTPClient(
                    appID: local.app.id, key: local.app.key, secret: local.app.secret, host: .host("localhost", port: local.port),
                    caFile: "/nonexistent/ca.pem", timeout: .seconds(5 * testTimeScale), connectionPool: pool)
                let setup = await #expect(throws: PusherHTTPError.self) {
                    try await missing.trigger(channels: ["news"], event: "update", data: "no CA")
                }
                #expect(setup?.message.hasPrefix("HTTP request failed: TLS set-up failed (CA file /nonexistent/ca.pem)") == true)
            }
        }
    }
}

/// A TCP socket bound to a free loopback port without listening: connections to it are refused.
private struct BoundPort {
    let descriptor: Int32
    let port: Int

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                Glibc.bind(socket, address, length) == 0 && getsockname(socket, address, &length) == 0
            }
        }
        guard socket >= 0, bound else { throw BoundPortError() }
        descriptor = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(descriptor) }
}

private struct BoundPortError: Error {}
