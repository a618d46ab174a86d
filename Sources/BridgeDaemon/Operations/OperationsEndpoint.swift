import Hummingbird
import Logging
import NIOCore
import ServerWarmUp
import ServiceLifecycle

/// Whether the daemon is ready to serve: `/readyz` answers 200 only when every bridge has both
/// sides connected (docs/contract.md §5.7); the body names what is not.
public struct Readiness: Sendable, Equatable {
    /// Bridges or sides that are not connected, e.g. `factory: pusher disconnected`.
    public var notReady: [String]
    /// Lines shown after `ready` or the problems: a cluster's members and channels held (§7.4).
    public var details: [String]

    public init(notReady: [String], details: [String] = []) {
        self.notReady = notReady
        self.details = details
    }

    public var isReady: Bool { notReady.isEmpty }
}

/// The HTTP endpoint for operators: `/metrics` (Prometheus text), `/healthz` (200 while the
/// process runs), `/readyz` (200 when every bridge is connected on both sides, else 503).
public struct OperationsEndpoint: Service {
    /// Host and port to listen on; port 0 picks a free one (see `onListening`).
    public var host: String
    public var port: Int
    let metrics: BridgeMetrics
    let readiness: @Sendable () -> Readiness
    let onListening: @Sendable (Int) async -> Void
    let logger: Logger

    public init(
        host: String,
        port: Int,
        metrics: BridgeMetrics,
        readiness: @escaping @Sendable () -> Readiness,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
        self.metrics = metrics
        self.readiness = readiness
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let router = Router()
        let metrics = self.metrics
        let readiness = self.readiness
        router.get("metrics") { _, _ -> Response in
            let body = metrics.render()
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: body))
            )
        }
        router.get("healthz") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        router.get("readyz") { _, _ -> Response in
            let report = readiness()
            let lines = (report.isReady ? ["ready"] : report.notReady) + report.details
            let text = lines.joined(separator: "\n") + "\n"
            return Response(
                status: report.isReady ? .ok : .serviceUnavailable,
                headers: [.contentType: "text/plain"],
                body: .init(byteBuffer: ByteBuffer(string: text))
            )
        }
        let onListening = self.onListening
        warmUpHTTP1ConnectionSetup()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                await onListening(channel.localAddress?.port ?? 0)
            },
            logger: logger
        )
        try await app.run()
    }
}
