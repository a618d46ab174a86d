import Backoff
import Foundation
import Locking
import Logging
import MQTTVocabulary
import TestSupport

@testable import MosquittoClient

/// Helpers shared by the integration tests.
enum ClientSupport {
    /// A client id no other test (or earlier run) uses.
    static func uniqueID(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString.prefix(12))"
    }

    /// Fast reconnects for tests.
    static let fastReconnect = ReconnectPolicy(
        initialDelay: .milliseconds(100), maxDelay: .milliseconds(400), multiplier: 2, jitter: 0.1,
        stableAfter: .seconds(2))

    /// A configuration for a broker on 127.0.0.1.
    static func configuration(
        port: Int, id: String, version: MQTTProtocolVersion = .v5, cleanSession: Bool = true
    ) -> MQTTConfiguration {
        MQTTConfiguration(
            host: "127.0.0.1", port: port, clientID: id, protocolVersion: version, cleanSession: cleanSession,
            keepAlive: .seconds(5), reconnect: fastReconnect, backpressureTimeout: .seconds(2),
            shutdownDrainTimeout: .seconds(1))
    }

    static let logger: Logger = {
        var logger = Logger(label: "mqtt-test")
        logger.logLevel = ProcessInfo.processInfo.environment["MQTT_TEST_LOG"] != nil ? .trace : .critical
        return logger
    }()

    /// Starts a client and waits until it is connected.
    static func connectedClient(_ configuration: MQTTConfiguration) async throws -> MQTTClient {
        let client = try MQTTClient(configuration: configuration, logger: logger)
        client.start()
        try await waitUntil("\(configuration.clientID) connected", timeout: .seconds(10)) {
            if case .connected = client.state { return true }
            return false
        }
        return client
    }

    /// Polls `condition` every 10 ms (it observes a real broker, there is no clock to advance).
    static func waitUntil(
        _ what: String, timeout: Duration = .seconds(5), _ condition: () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Collects up to `count` messages, or what arrived within `timeout`.
    static func receive(_ count: Int, from client: MQTTClient, within timeout: Duration = .seconds(5)) async
        -> [MQTTMessage]
    {
        await receive(from: client, within: timeout) { $0.count >= count }
    }

    /// Collects messages until `done` says so, or what arrived within `timeout`.
    static func receive(
        from client: MQTTClient, within timeout: Duration, until done: @escaping @Sendable ([MQTTMessage]) -> Bool
    ) async -> [MQTTMessage] {
        let collected = Collected()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in client.messages {
                    _ = collected.append(message)
                    if done(collected.messages) { return }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        return collected.messages
    }

    final class Collected: Sendable {
        private let storage = Locked<[MQTTMessage]>([])
        func append(_ message: MQTTMessage) -> Int {
            storage.withLock {
                $0.append(message)
                return $0.count
            }
        }
        var messages: [MQTTMessage] { storage.withLock { $0 } }
    }
}

extension MQTTMessage {
    /// A message with a UTF-8 payload.
    static func text(_ topic: String, _ text: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false) -> MQTTMessage {
        MQTTMessage(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// The payload as UTF-8 text.
    var text: String { String(decoding: payload, as: UTF8.self) }
}
