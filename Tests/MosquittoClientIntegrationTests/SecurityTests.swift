import Foundation
import MQTTVocabulary
import TestSupport
import Testing

@testable import MosquittoClient

/// TLS, mutual TLS and credentials against a real mosquitto with certificates made by openssl.
@Suite(.timeLimit(.minutes(1))) struct SecurityTests {
    typealias S = ClientSupport

    static func certificates() throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-certs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try TestCertificates.make(in: directory)
    }

    func tlsBroker(_ certificates: TestCertificates, mutual: Bool) async throws -> Mosquitto {
        let broker = try Mosquitto(
            .init(
                tls: .init(
                    caFile: certificates.caFile, certificateFile: certificates.serverCertificate,
                    keyFile: certificates.serverKey, requireClientCertificate: mutual)))
        try await broker.start()
        return broker
    }

    /// Waits for the first failed attempt and returns its error.
    func firstError(of client: MQTTClient) async throws -> MQTTError {
        var result: MQTTError?
        try await S.waitUntil("a failed connect", timeout: .seconds(10)) {
            if case .disconnected(let error, _) = client.state { result = error }
            return result != nil
        }
        return try #require(result)
    }

    @Test func tlsWithTheTestCA() async throws {
        let certificates = try Self.certificates()
        defer { try? FileManager.default.removeItem(atPath: certificates.directory) }
        let broker = try await tlsBroker(certificates, mutual: false)
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("tls"))
        configuration.tls = MQTTTLSConfiguration(caFile: certificates.caFile)
        let client = try await S.connectedClient(configuration)
        try await client.subscribe(MQTTSubscription("tls/#"))
        try await client.publish(.text("tls/a", "over TLS"))
        #expect(await S.receive(1, from: client).map(\.text) == ["over TLS"])
        await client.shutdown()
    }

    @Test func mutualTLS() async throws {
        let certificates = try Self.certificates()
        defer { try? FileManager.default.removeItem(atPath: certificates.directory) }
        let broker = try await tlsBroker(certificates, mutual: true)

        var withCertificate = S.configuration(port: broker.port, id: S.uniqueID("mtls"))
        withCertificate.tls = MQTTTLSConfiguration(
            caFile: certificates.caFile, certificateFile: certificates.clientCertificate, keyFile: certificates.clientKey)
        let client = try await S.connectedClient(withCertificate)
        try await client.publish(.text("mtls/a", "with a client certificate"))
        await client.shutdown()

        var without = S.configuration(port: broker.port, id: S.uniqueID("no-cert"))
        without.tls = MQTTTLSConfiguration(caFile: certificates.caFile)
        let refused = try MQTTClient(configuration: without, logger: S.logger)
        refused.start()
        let error = try await firstError(of: refused)
        #expect(error.kind == .tls || error.kind == .connectionLost, "\(error)")
        await refused.shutdown()
    }

    @Test func aWrongCAFailsWithAClearTLSError() async throws {
        let certificates = try Self.certificates()
        defer { try? FileManager.default.removeItem(atPath: certificates.directory) }
        let broker = try await tlsBroker(certificates, mutual: false)
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("wrong-ca"))
        configuration.tls = MQTTTLSConfiguration(caFile: certificates.otherCAFile)
        let client = try MQTTClient(configuration: configuration, logger: S.logger)
        client.start()
        let error = try await firstError(of: client)
        #expect(error.kind == .tls)
        #expect(error.message.contains("certificate verify failed"), "\(error)")
        #expect(error.message.contains("127.0.0.1:\(broker.port)"), "\(error)")
        await client.shutdown()
    }

    @Test func wrongCredentialsOnMQTT5AreAClearErrorThenRecover() async throws {
        let broker = try Mosquitto(.init(allowAnonymous: false, users: ["bridge": "the-right-one"]))
        try await broker.start()
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("creds"))
        configuration.username = "bridge"
        configuration.password = "not-the-right-one"
        let client = try MQTTClient(configuration: configuration, logger: S.logger)
        client.start()
        let error = try await firstError(of: client)
        #expect(error.kind == .connectionRefused)
        // MQTT 5 reason 0x86 Bad User Name or Password or 0x87 Not authorized.
        #expect(error.code == 0x86 || error.code == 0x87, "\(error)")
        #expect(!error.message.contains("not-the-right-one"), "the password must never appear in errors")
        // libmosquitto's own loop would be dead now (docs/mqtt-notes.md §6); ours keeps retrying.
        try await Task.sleep(for: .milliseconds(500))
        #expect(client.state != .stopped(error: nil))

        try broker.setUsers(["bridge": "not-the-right-one"])
        try await broker.restart()
        try await S.waitUntil("recovered after the broker accepts", timeout: .seconds(10)) {
            if case .connected = client.state { return true }
            return false
        }
        try await client.publish(.text("creds/ok", "accepted now"))
        await client.shutdown()
    }

    @Test func wrongCredentialsOnMQTT311AreRefusedToo() async throws {
        let broker = try Mosquitto(.init(allowAnonymous: false, users: ["bridge": "secret"]))
        try await broker.start()
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("creds3"), version: .v311)
        configuration.username = "bridge"
        configuration.password = "wrong"
        let client = try MQTTClient(configuration: configuration, logger: S.logger)
        client.start()
        let error = try await firstError(of: client)
        #expect(error.kind == .connectionRefused, "\(error)")
        #expect(error.code == 5 || error.code == 4, "\(error)")
        await client.shutdown()
    }
}
