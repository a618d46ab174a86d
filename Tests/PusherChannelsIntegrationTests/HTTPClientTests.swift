import Foundation
import HTTPTypes
import Hummingbird
import Locking
import Logging
import NIOCore
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// What the fake HTTP API saw.
private final class APIRecorder: Sendable {
    struct Seen: Sendable {
        var method: String
        var path: String
        var body: String
        var signatureProblem: String?
    }
    private let requests = Locked<[Seen]>([])
    /// The status the next requests get.
    let status = Locked<Int>(200)
    func append(_ seen: Seen) { requests.withLock { $0.append(seen) } }
    var seen: [Seen] { requests.withLock { $0 } }
}

/// An HTTP server on 127.0.0.1 that checks every request's signature like Pusher does
/// (docs/pusher-protocol.md §2) and answers with canned bodies.
private func withFakeAPI(_ body: @Sendable (Int, APIRecorder, PusherHTTPConnectionPool) async throws -> Void) async throws {
    let recorder = APIRecorder()
    let verifier = RequestSignature(key: "key", secret: "secret")
    let router = Router()
    let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
        let bodyBuffer = try await request.body.collect(upTo: 1 << 20)
        let bodyBytes = Array(buffer: bodyBuffer)
        let params = request.uri.queryParameters.map { (String($0.key), String($0.value)) }
        let problem = verifier.verify(
            method: request.method.rawValue,
            path: request.uri.path,
            params: params,
            body: bodyBytes,
            now: Int(Date().timeIntervalSince1970)
        )
        recorder.append(
            .init(
                method: request.method.rawValue, path: request.uri.path, body: String(decoding: bodyBytes, as: UTF8.self),
                signatureProblem: problem?.description))
        if let problem {
            return Response(status: .unauthorized, body: .init(byteBuffer: ByteBuffer(string: problem.description)))
        }
        let status = recorder.status.withLock { $0 }
        let reply: String =
            if request.uri.path.hasSuffix("/users") {
                #"{"users":[{"id":"1"},{"id":2}]}"#
            } else if request.uri.path.hasSuffix("/channels") {
                #"{"channels":{"presence-a":{"user_count":2},"news":{}}}"#
            } else if request.uri.path.contains("/channels/") {
                #"{"occupied":true,"subscription_count":3}"#
            } else {
                "{}"
            }
        return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: reply)))
    }
    router.post("/apps/:id/events", use: handler)
    router.post("/apps/:id/batch_events", use: handler)
    router.get("/apps/:id/channels", use: handler)
    router.get("/apps/:id/channels/:name", use: handler)
    router.get("/apps/:id/channels/:name/users", use: handler)
    var logger = Logger(label: "fake-pusher-api")
    logger.logLevel = .critical
    let (running, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            continuation.yield(channel.localAddress?.port ?? 0)
            continuation.finish()
        },
        logger: logger
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        var iterator = running.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw TestFailure("API server did not start") }
        defer { group.cancelAll() }
        // A connection pool of this test only, closed before the server stops: an idle
        // keep-alive connection of a shared pool can hold up the server's graceful shutdown.
        let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 8)
        do {
            try await body(port, recorder, http)
        } catch {
            await http.shutdown()
            throw error
        }
        await http.shutdown()
    }
}

private func api(port: Int, http: PusherHTTPConnectionPool = .shared) -> PusherHTTPClient {
    PusherHTTPClient(
        appID: "3", key: "key", secret: "secret", host: .host("127.0.0.1", port: port), encrypted: false, timeout: .seconds(5),
        connectionPool: http)
}

@Suite(.timeLimit(.minutes(1))) struct HTTPClientTests {
    @Test func triggerAndBatchAreSignedAndShapedPerTheProtocol() async throws {
        try await withFakeAPI { port, recorder, http in
            let client = api(port: port, http: http)
            try await client.trigger(
                channels: ["a", "b"], event: "temperature", data: #"{"t":21.5}"#, socketID: "1.2", info: ["user_count"])
            try await client.triggerBatch([
                PusherBatchEvent(channel: "sensor-1", name: "t", data: "1"),
                PusherBatchEvent(channel: "sensor-2", name: "t", data: "é \"2\"", socketID: "3.4"),
            ])
            let seen = recorder.seen
            #expect(seen.count == 2)
            #expect(seen.allSatisfy { $0.signatureProblem == nil })
            #expect(seen[0].path == "/apps/3/events")
            #expect(
                seen[0].body == #"{"name":"temperature","data":"{\"t\":21.5}","channels":["a","b"],"socket_id":"1.2","info":"user_count"}"#)
            #expect(seen[1].path == "/apps/3/batch_events")
            #expect(
                seen[1].body
                    == #"{"batch":[{"channel":"sensor-1","name":"t","data":"1"},{"channel":"sensor-2","name":"t","data":"é \"2\"","socket_id":"3.4"}]}"#
            )
        }
    }

    @Test func queriesAreSignedAndDecoded() async throws {
        try await withFakeAPI { port, recorder, http in
            let client = api(port: port, http: http)
            let channels = try await client.channels(prefix: "presence-", info: ["user_count"])
            #expect(channels["presence-a"]?.userCount == 2)
            #expect(channels.keys.sorted() == ["news", "presence-a"])
            let info = try await client.channel("news", info: ["subscription_count"])
            #expect(info.occupied == true)
            #expect(info.subscriptionCount == 3)
            #expect(try await client.users(channel: "presence-a") == ["1", "2"])
            #expect(recorder.seen.allSatisfy { $0.signatureProblem == nil })
            #expect(recorder.seen.count == 3)
        }
    }

    @Test func invalidRequestsAreRefusedBeforeSending() async throws {
        try await withFakeAPI { port, recorder, http in
            let client = api(port: port, http: http)
            let tooMany = (0..<11).map { PusherBatchEvent(channel: "c\($0)", name: "e", data: "") }
            let cases: [@Sendable () async throws -> Void] = [
                { _ = try await client.triggerBatch(tooMany) },
                { _ = try await client.triggerBatch([]) },
                { _ = try await client.trigger(channels: [], event: "e", data: "") },
                { _ = try await client.trigger(channels: Array(repeating: "c", count: 101), event: "e", data: "") },
                { _ = try await client.trigger(channels: ["bad channel"], event: "e", data: "") },
                { _ = try await client.trigger(channels: ["ok", "bad/channel"], event: "e", data: "") },
                { _ = try await client.trigger(channels: ["c"], event: "pusher:x", data: "") },
                { _ = try await client.trigger(channels: ["c"], event: String(repeating: "e", count: 201), data: "") },
                { _ = try await client.trigger(channels: ["c"], event: "e", data: String(repeating: "x", count: 10 * 1024 + 1)) },
                { _ = try await client.trigger(channels: ["c"], event: "e", data: "", socketID: "nope") },
                { _ = try await client.users(channel: "not-presence") },
            ]
            for run in cases {
                do {
                    try await run()
                    Issue.record("an invalid request was accepted")
                } catch let error as PusherHTTPError {
                    #expect(error.isInvalidRequest)
                    #expect(!error.isRetryable)
                    #expect(error.status == nil)
                }
            }
            #expect(recorder.seen.isEmpty)
        }
    }

    @Test(arguments: [(500, true), (503, true), (429, true), (400, false), (403, false), (413, false)])
    func errorStatusesAreTypedWithRetryability(status: Int, retryable: Bool) async throws {
        try await withFakeAPI { port, recorder, http in
            recorder.status.withLock { $0 = status }
            do {
                try await api(port: port, http: http).trigger(channels: ["c"], event: "e", data: "d")
                Issue.record("status \(status) was not an error")
            } catch let error as PusherHTTPError {
                #expect(error.status == status)
                #expect(error.isRetryable == retryable)
            }
        }
    }

    @Test func networkErrorsAreRetryable() async throws {
        // A port nothing listens on: bind a server, learn its port, stop it, then call it.
        let freePort = Locked(0)
        try await withFakeAPI { port, _, _ in freePort.withLock { $0 = port } }
        do {
            var client = api(port: freePort.withLock { $0 })
            client.timeout = .seconds(1)
            try await client.trigger(channels: ["c"], event: "e", data: "d")
            Issue.record("a closed port answered")
        } catch {
            #expect(error.status == nil)
            #expect(error.isRetryable)
        }
    }
}
