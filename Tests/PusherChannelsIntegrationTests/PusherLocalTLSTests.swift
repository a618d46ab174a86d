import Backoff
import Foundation
import Logging
import PusherLocal
import Testing

@testable import PusherChannels

/// Our WebSocket client and HTTP API client against pusher-local serving `wss://` and `https://`
/// with a test CA (docs/contract.md §6): both trust `caFile`, with verification on.
@Suite(.timeLimit(.minutes(1))) struct PusherLocalTLSTests {
    @Test func clientAndHTTPAPITrustTheCAFileAndRefuseWithoutIt() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        var configuration = PusherLocalConfiguration(port: 0)
        configuration.tls = try PusherLocalTLS.load(certificateFile: certificates.certificateFile, keyFile: certificates.keyFile)
        try await PusherLocalServer.withRunning(configuration, logger: PusherLocalIntegrationTests.quiet("pusher-local")) { local in
            let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 8)
            do {
                try await exercise(local, certificates: certificates, http: http)
                await http.shutdown()
            } catch {
                await http.shutdown()
                throw error
            }
        }
    }

    private func exercise(_ local: RunningPusherLocal, certificates: TestCertificates, http: PusherHTTPConnectionPool) async throws {
        // Not a test of the timeout: a debug build's TLS handshake on a loaded machine can take
        // seconds, and the untrusted call fails on the certificate long before 10 s.
        @Sendable func api(caFile: String?) -> PusherHTTPClient {
            PusherHTTPClient(
                appID: local.app.id, key: local.app.key, secret: local.app.secret, host: .host("127.0.0.1", port: local.port),
                encrypted: true, caFile: caFile, timeout: .seconds(10 * testTimeScale), connectionPool: http)
        }
        // Without the CA, the system roots do not know the test CA: the request fails, nothing is sent.
        await #expect(throws: PusherHTTPError.self) {
            try await api(caFile: nil).trigger(channels: ["news"], event: "update", data: "untrusted")
        }
        let client = PusherClient(
            options: PusherClientOptions(
                key: local.app.key,
                host: .host("localhost", port: local.port),
                encrypted: true,
                caFile: certificates.caFile,
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0.2)
            ),
            logger: PusherLocalIntegrationTests.quiet("pusher-client")
        )
        let updates = client.updates()
        client.subscribe("news")
        try await withRunningClient(client) { client in
            client.connect()
            _ = try await collect(updates, "subscribed over wss") { seen in
                seen.contains { if case .subscriptionSucceeded("news") = $0 { true } else { false } }
            }
            try await api(caFile: certificates.caFile).trigger(channels: ["news"], event: "update", data: "over https")
            let seen = try await collect(updates, "the event") { seen in
                seen.contains { PusherLocalIntegrationTests.isEvent($0, channel: "news", name: "update") }
            }
            let events = seen.compactMap { if case .event(let e) = $0, e.name == "update" { e.data } else { nil } }
            #expect(events == ["over https"])
        }
    }
}
