import Locking
import MQTTVocabulary
import Testing

@testable import MosquittoClient

/// A client whose network thread cannot be created (`pthread_create` failed) gives up at once
/// instead of leaving its callers waiting for a thread that never runs. No broker is needed: the
/// failure comes before any connection.
@Suite struct NetworkThreadStartTests {
    @Test func aClientWithoutANetworkThreadStopsWithTheErrorAndFailsWhatWaits() async throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 9, clientID: "no-thread"))
        // `run()` returns (it waited for a stop that no thread would carry out before).
        await DetachedThreadTesting.$refusesCreation.withValue(true) { await client.run() }
        guard case .stopped(let error?) = client.state else {
            Issue.record("expected stopped with an error, got \(client.state)")
            return
        }
        #expect(error.kind == .library)
        #expect(error.message.contains("network thread"))
        await #expect(throws: MQTTError.self) {
            try await client.publish(MQTTMessage(topic: "t", payload: [1], qos: .atLeastOnce, retain: false))
        }
        await client.shutdown()
    }
}
