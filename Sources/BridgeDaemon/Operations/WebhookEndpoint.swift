import BridgeCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServerWarmUp
import ServiceLifecycle

/// The one HTTP listener for every bridge's webhooks (docs/contract.md §7.2, `[daemon] webhooks`):
/// `POST /webhooks/<bridge>`; 404 for a bridge that does not exist or has no `[bridge.webhooks]`,
/// 405 for other methods, 413 for a body over 1 MiB (from `Content-Length`, or while reading).
/// The rest is the bridge's (``BridgeRuntime/webhookRequest(body:key:signature:)``). Plain HTTP:
/// TLS is terminated by a reverse proxy in front (docs/guide/webhooks.md, "Exposing the endpoint").
struct WebhookEndpoint: Service {
    /// Host and port to listen on; port 0 picks a free one (see `onListening`).
    var host: String
    var port: Int
    /// The running bridge with this name, if any.
    let bridge: @Sendable (String) -> BridgeRuntime?
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    static let keyHeader = HTTPField.Name("X-Pusher-Key")!
    static let signatureHeader = HTTPField.Name("X-Pusher-Signature")!

    func run() async throws {
        let router = Router()
        let bridge = self.bridge
        let limit = WebhookReceiver<ContinuousClock.Instant>.maximumBodyBytes
        router.post("webhooks/:bridge") { request, context -> Response in
            guard let name = context.parameters.get("bridge"), let runtime = bridge(name), runtime.takesWebhooks else {
                return Self.reply(WebhookReply(status: 404, text: "no bridge with webhooks has this name\n"))
            }
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
                return Self.reply(runtime.webhookTooLarge())
            }
            let body: ByteBuffer
            do {
                body = try await request.body.collect(upTo: limit)
            } catch {
                return Self.reply(runtime.webhookTooLarge())
            }
            let reply = await runtime.webhookRequest(
                body: Array(buffer: body), key: request.headers[Self.keyHeader], signature: request.headers[Self.signatureHeader])
            return Self.reply(reply)
        }
        for method in [HTTPRequest.Method.get, .put, .delete, .patch, .head, .options] {
            router.on("webhooks/:bridge", method: method) { _, _ -> Response in
                var response = Self.reply(WebhookReply(status: 405, text: "webhooks are POSTed\n"))
                response.headers[.allow] = "POST"
                return response
            }
        }
        let onListening = self.onListening
        warmUpHTTP1ConnectionSetup()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        try await app.run()
    }

    private static func reply(_ reply: WebhookReply) -> Response {
        Response(
            status: HTTPResponse.Status(code: reply.status), headers: [.contentType: "text/plain"],
            body: .init(byteBuffer: ByteBuffer(string: reply.text)))
    }
}
