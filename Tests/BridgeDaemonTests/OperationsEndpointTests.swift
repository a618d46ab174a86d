import AsyncHTTPClient
import BridgeDaemon
import Locking
import Logging
import NIOCore
import Testing

@Suite struct OperationsEndpointTests {
    @Test func servesMetricsHealthAndReadiness() async throws {
        let metrics = BridgeMetrics()
        metrics.messages(bridge: "factory", rule: "prices", direction: .pusherToMQTT, outcome: .delivered).increment(by: 3)
        metrics.connectionUp(bridge: "factory", side: .mqtt).record(1)
        metrics.recordDelivery(.milliseconds(3))
        let ready = Locked(Readiness(notReady: ["factory: pusher disconnected"]))
        let port = AsyncStream.makeStream(of: Int.self)
        let endpoint = OperationsEndpoint(
            host: "127.0.0.1", port: 0, metrics: metrics, readiness: { ready.withLock { $0 } },
            logger: Logger(label: "test"), onListening: { port.continuation.yield($0) }
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await endpoint.run() }
            var iterator = port.stream.makeAsyncIterator()
            let bound = try #require(await iterator.next())
            let base = "http://127.0.0.1:\(bound)"
            let client = HTTPClient.shared

            let metricsResponse = try await client.execute(HTTPClientRequest(url: base + "/metrics"), timeout: .seconds(5))
            #expect(metricsResponse.status == .ok)
            let text = String(buffer: try await metricsResponse.body.collect(upTo: 1 << 20))
            #expect(
                text.contains(
                    #"pusher_mqtt_bridge_messages_total{bridge="factory",rule="prices",direction="pusher_to_mqtt",outcome="delivered"} 3"#))
            #expect(text.contains(#"pusher_mqtt_bridge_connection_up{bridge="factory",side="mqtt"} 1"#))
            #expect(text.contains("pusher_mqtt_bridge_delivery_seconds_bucket"))

            let health = try await client.execute(HTTPClientRequest(url: base + "/healthz"), timeout: .seconds(5))
            #expect(health.status == .ok)

            let notReady = try await client.execute(HTTPClientRequest(url: base + "/readyz"), timeout: .seconds(5))
            #expect(notReady.status == .serviceUnavailable)
            #expect(String(buffer: try await notReady.body.collect(upTo: 4096)).contains("factory: pusher disconnected"))

            ready.withLock { $0 = Readiness(notReady: []) }
            let nowReady = try await client.execute(HTTPClientRequest(url: base + "/readyz"), timeout: .seconds(5))
            #expect(nowReady.status == .ok)
            group.cancelAll()
        }
    }
}
