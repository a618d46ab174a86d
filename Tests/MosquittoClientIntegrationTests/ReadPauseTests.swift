import Foundation
import MQTTVocabulary
import TestSupport
import Testing

@testable import MosquittoClient

/// `incomingOverflow = .pauseReading` against a real broker: a stuck consumer costs no message;
/// the client stops reading instead, and a pause beyond the keep-alive costs only the connection,
/// which is opened again once there is room (docs/contract.md §7.6, docs/mqtt-notes.md §12).
@Suite(.timeLimit(.minutes(1))) struct ReadPauseTests {
    typealias S = ClientSupport

    static func pausingConfiguration(
        port: Int, id: String, capacity: Int, version: MQTTProtocolVersion = .v5
    ) -> MQTTConfiguration {
        var configuration = S.configuration(port: port, id: id, version: version, cleanSession: false)
        configuration.messageBufferSize = capacity
        configuration.incomingOverflow = .pauseReading
        return configuration
    }

    @Test func aStuckConsumerPausesReadingAndLosesNothing() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try await S.connectedClient(Self.pausingConfiguration(port: broker.port, id: S.uniqueID("pause"), capacity: 5))
        try await client.subscribe(MQTTSubscription("pause/#", qos: .atLeastOnce))
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub")))
        for n in 0..<200 { try await publisher.send(.text("pause/t", "\(n)")) }
        // Far longer than the former block-then-drop timeout (2 s here): nothing is taken.
        try await Task.sleep(for: .seconds(3))
        #expect(client.connection.messageBuffer.level.messages <= 6)  // the high-water mark, plus at most one read
        #expect(client.state == .connected(sessionPresent: false))
        let received = await S.receive(200, from: client, within: .seconds(10))
        #expect(received.map(\.text) == (0..<200).map { "\($0)" })
        #expect(client.droppedMessageCount == 0)
        await publisher.shutdown()
        await client.shutdown()
    }

    @Test(arguments: [MQTTProtocolVersion.v311, .v5])
    func aPauseBeyondTheKeepAliveClosesTheConnectionAndTheReconnectWaitsForRoom(version: MQTTProtocolVersion) async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try await S.connectedClient(
            Self.pausingConfiguration(port: broker.port, id: S.uniqueID("held"), capacity: 5, version: version))
        try await client.subscribe(MQTTSubscription("held/#", qos: .atLeastOnce))
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub")))
        for n in 0..<100 { try await publisher.send(.text("held/t", "\(n)")) }
        // keepalive 5 s: PINGREQ after 5 s without a read, closed after 5 more.
        try await S.waitUntil("closed by the keep-alive", timeout: .seconds(15)) {
            if case .disconnected(let error, _) = client.state { return error.code == Int(MosquittoCode.keepAliveExpired) }
            return false
        }
        // The backoff (≈ 100 ms) elapses many times over: no reconnect while the buffer is full.
        try await Task.sleep(for: .seconds(1))
        if case .disconnected = client.state {} else { Issue.record("reconnected while paused: \(client.state)") }
        for n in 100..<120 { try await publisher.send(.text("held/t", "\(n)")) }  // queued in the session meanwhile
        let received = await S.receive(120, from: client, within: .seconds(15))
        #expect(received.map(\.text) == (0..<120).map { "\($0)" })
        #expect(client.state == .connected(sessionPresent: true))
        #expect(client.droppedMessageCount == 0)
        await publisher.shutdown()
        await client.shutdown()
    }
}
