import Foundation
import HTTPTypes
import Hummingbird
import Locking
import Logging
import PusherLocal
import PusherProtocol
import ServiceLifecycle
import Testing

/// Webhooks posted by pusher-local to a real HTTP receiver started by the test.
@Suite(.timeLimit(.minutes(1)))
struct WebhookTests {
    /// One received webhook request.
    struct Received: Sendable {
        var body: String
        var key: String?
        var signature: String?
    }

    final class Inbox: Sendable {
        let requests = Locked<[Received]>([])

        /// Event names received so far, in order.
        var names: [String] {
            requests.withLock { requests in
                requests.flatMap { request -> [String] in
                    guard let object = try? JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any],
                        let events = object["events"] as? [[String: Any]]
                    else { return ["<unparsable>"] }
                    return events.compactMap { $0["name"] as? String }
                }
            }
        }

        func waitFor(_ count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(5)
            while names.count < count {
                guard ContinuousClock.now < deadline else { throw TestClientError.timeout("\(count) webhooks, have \(names)") }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Runs an HTTP server on a free port that stores every POST.
    func withReceiver(_ body: @Sendable (Int, Inbox) async throws -> Void) async throws {
        let inbox = Inbox()
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Int.self)
        let router = Router()
        router.post("/hooks") { request, _ -> HTTPResponse.Status in
            var request = request
            let buffer = try await request.collectBody(upTo: 1 << 20)
            let received = Received(
                body: String(buffer: buffer),
                key: request.headers.first { $0.name.canonicalName == "x-pusher-key" }?.value,
                signature: request.headers.first { $0.name.canonicalName == "x-pusher-signature" }?.value
            )
            inbox.requests.withLock { $0.append(received) }
            return .ok
        }
        var logger = Logger(label: "webhook-receiver")
        logger.logLevel = .warning
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                readyContinuation.yield(channel.localAddress?.port ?? 0)
                readyContinuation.finish()
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { readyContinuation.finish() }
                try await group.run()
            }
            var iterator = ready.makeAsyncIterator()
            let port = try #require(await iterator.next())
            do {
                try await body(port, inbox)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    @Test func channelAndPresenceWebhooksAreSignedWithTheSecret() async throws {
        try await withReceiver { port, inbox in
            let configuration = testConfiguration(webhook: "http://127.0.0.1:\(port)/hooks")
            try await withServer(configuration) { running in
                try await withSocket(running.webSocketURL()) { socket in
                    let id = try await establish(socket)
                    try await subscribe(socket, socketID: id, channel: "presence-hooks", userID: "hooked")
                    try await inbox.waitFor(2)
                    #expect(inbox.names == ["channel_occupied", "member_added"])
                }
                try await inbox.waitFor(4)
                #expect(inbox.names == ["channel_occupied", "member_added", "member_removed", "channel_vacated"])
            }
            for request in inbox.requests.withLock({ $0 }) {
                #expect(request.key == "app-key")
                #expect(request.signature == hmacSHA256Hex(secret: "app-secret", message: request.body))
                #expect(request.body.hasPrefix("{\"time_ms\":"))
            }
        }
    }
}
