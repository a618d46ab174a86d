import AsyncHTTPClient
import Logging
import NIOCore
import PusherProtocol

import struct Foundation.Date

/// Posts webhooks (docs/pusher-protocol.md §2, "Webhooks"): `{"time_ms","events":[…]}` with
/// `X-Pusher-Key` and `X-Pusher-Signature` = hex HMAC-SHA256(secret, body).
///
/// Events are queued without blocking the caller and posted by one task (``run()``) in order,
/// one event per request (hosted Pusher batches; receivers accept both). A failed post is
/// logged and counted, not retried: pusher-local is a development server.
final class WebhookSender: Sendable {
    struct Item: Sendable {
        var app: PusherLocalApp
        var event: WebhookEvent
    }

    let url: String
    let logger: Logger
    private let stream: AsyncStream<Item>
    private let continuation: AsyncStream<Item>.Continuation

    init(url: String, logger: Logger) {
        self.url = url
        self.logger = logger
        (stream, continuation) = AsyncStream.makeStream(of: Item.self)
    }

    /// Queues one event.
    func post(_ event: WebhookEvent, app: PusherLocalApp) {
        continuation.yield(Item(app: app, event: event))
    }

    /// Stops taking events; ``run()`` returns after posting what is queued.
    func finish() { continuation.finish() }

    /// The signed body and headers of one webhook request.
    static func request(events: [WebhookEvent], app: PusherLocalApp, timeMillis: Int64) -> (body: String, signature: String) {
        let body = "{\"time_ms\":" + String(timeMillis) + ",\"events\":[" + events.map(\.json).joined(separator: ",") + "]}"
        return (body, hmacSHA256Hex(secret: app.secret, message: body))
    }

    /// Posts queued events, one request each and in order, until ``finish()`` is called or
    /// the task is cancelled.
    func run() async {
        for await item in stream {
            await postBatch([item])
        }
    }

    private func postBatch(_ items: [Item]) async {
        guard let app = items.first?.app else { return }
        let events = items.map(\.event)
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let (body, signature) = Self.request(events: events, app: app, timeMillis: millis)
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "X-Pusher-Key", value: app.key)
        request.headers.add(name: "X-Pusher-Signature", value: signature)
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
            if !(200..<300).contains(Int(response.status.code)) {
                logger.warning("Webhook refused", metadata: ["http.status": "\(response.status.code)", "webhook.url": "\(url)"])
            }
            _ = try? await response.body.collect(upTo: 64 * 1024)
        } catch {
            logger.warning("Webhook post failed", metadata: ["error": "\(error)", "webhook.url": "\(url)"])
        }
    }
}
