import Foundation
import MQTTVocabulary
import TestSupport
import Testing

@testable import MosquittoClient

/// Round trips through a real mosquitto that each test starts on its own port.
@Suite(.timeLimit(.minutes(1))) struct PublishSubscribeTests {
    typealias S = ClientSupport

    @Test(arguments: [MQTTQoS.atMostOnce, .atLeastOnce, .exactlyOnce], [MQTTProtocolVersion.v311, .v5])
    func roundTripAtEachQoS(qos: MQTTQoS, version: MQTTProtocolVersion) async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let subscriber = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("sub"), version: version))
        let granted = try await subscriber.subscribe(MQTTSubscription("rt/#", qos: .exactlyOnce))
        #expect(granted == .exactlyOnce)
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub"), version: version))
        for n in 0..<20 {
            try await publisher.publish(.text("rt/\(n)", "message \(n)", qos: qos))
        }
        let received = await S.receive(20, from: subscriber)
        #expect(received.map(\.text) == (0..<20).map { "message \($0)" })
        #expect(received.map(\.topic) == (0..<20).map { "rt/\($0)" })
        #expect(received.allSatisfy { $0.qos == qos && !$0.retain })
        #expect(publisher.inFlightCount == 0)
        await publisher.shutdown()
        await subscriber.shutdown()
        #expect(publisher.state == .stopped(error: nil))
    }

    @Test func sendKeepsManyInFlightAndReportsEachCompletion() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("pub"))
        configuration.maxInFlight = 50
        let publisher = try await S.connectedClient(configuration)
        var ids: Set<MQTTPublishID> = []
        for n in 0..<2000 {
            ids.insert(try await publisher.send(.text("many/\(n % 10)", "\(n)", qos: .atLeastOnce)))
            #expect(publisher.inFlightCount <= 50)
        }
        var completed: Set<MQTTPublishID> = []
        for await completion in publisher.completions {
            #expect(completion.error == nil)
            completed.insert(completion.id)
            if completed.count == ids.count { break }
        }
        #expect(completed == ids)
        await publisher.shutdown()
    }

    @Test func retainedMessageIsSetAndClearedWithAZeroLengthPayload() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub")))
        try await publisher.publish(.text("state/lamp", "on", qos: .atLeastOnce, retain: true))

        let late = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("late")))
        try await late.subscribe(MQTTSubscription("state/#"))
        let retained = await S.receive(1, from: late)
        #expect(retained.map(\.text) == ["on"])
        #expect(retained.first?.retain == true)
        await late.shutdown()

        try await publisher.publish(MQTTMessage(topic: "state/lamp", payload: [], qos: .atLeastOnce, retain: true))
        let later = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("later")))
        try await later.subscribe(MQTTSubscription("state/#"))
        let none = await S.receive(1, from: later, within: .milliseconds(400))
        #expect(none.isEmpty, "the zero-length retained publish must delete the retained message")
        await later.shutdown()
        await publisher.shutdown()
    }

    @Test func mqtt5PropertiesArrive() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let subscriber = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("sub")))
        try await subscriber.subscribe(MQTTSubscription("props/#"))
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub")))
        let properties = MQTTPublishProperties(
            userProperties: [
                MQTTUserProperty("pusher-channel", "market-data"), MQTTUserProperty("pusher-event", "new-price"),
                MQTTUserProperty("pusher-event", "repeated names are allowed"),
            ],
            contentType: "application/json", messageExpiry: 600, payloadFormatIndicator: 1,
            responseTopic: "props/reply", correlationData: [1, 2, 3])
        try await publisher.publish(
            MQTTMessage(topic: "props/a", payload: Array(#"{"p":1}"#.utf8), qos: .atLeastOnce, properties: properties))
        let received = try #require(await S.receive(1, from: subscriber).first)
        #expect(received.properties.userProperties == properties.userProperties)
        #expect(received.properties.contentType == "application/json")
        #expect(received.properties.payloadFormatIndicator == 1)
        #expect(received.properties.responseTopic == "props/reply")
        #expect(received.properties.correlationData == [1, 2, 3])
        // The broker forwards the remaining lifetime.
        let expiry = try #require(received.properties.messageExpiry)
        #expect(expiry <= 600 && expiry >= 590)
        await publisher.shutdown()
        await subscriber.shutdown()
    }

    @Test func noLocalSuppressesOurOwnPublishes() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let bridge = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("bridge")))
        try await bridge.subscribe(MQTTSubscription("echo/#", qos: .atLeastOnce, noLocal: true))
        let other = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("other")))
        try await other.subscribe(MQTTSubscription("echo/#", qos: .atLeastOnce))

        try await bridge.publish(.text("echo/a", "from bridge"))
        // The other client sees it, so it was published; the bridge must not get it back.
        #expect(await S.receive(1, from: other).map(\.text) == ["from bridge"])
        try await other.publish(.text("echo/b", "from other"))
        // The bridge's next message is the other client's, not its own.
        #expect(await S.receive(1, from: bridge).map(\.text) == ["from other"])
        #expect(await S.receive(1, from: bridge, within: .milliseconds(300)).isEmpty)
        await bridge.shutdown()
        await other.shutdown()
    }

    @Test func unsubscribeStopsDelivery() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("c")))
        try await client.subscribe(MQTTSubscription("u/#"))
        try await client.publish(.text("u/1", "one"))
        #expect(await S.receive(1, from: client).map(\.text) == ["one"])
        try await client.unsubscribe("u/#")
        try await client.publish(.text("u/2", "two"))
        #expect(await S.receive(1, from: client, within: .milliseconds(300)).isEmpty)
        await client.shutdown()
    }

    @Test func mqtt5OnlyFeaturesAreRefusedWithMQTT311() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("v3"), version: .v311))
        var message = MQTTMessage.text("v3/t", "x")
        message.properties.contentType = "text/plain"
        #expect(throws: MQTTError.self) { try client.trySend(message) }
        do {
            try await client.subscribe(MQTTSubscription("v3/#", noLocal: true))
            Issue.record("no_local with MQTT 3.1.1 must fail")
        } catch let error as MQTTError {
            #expect(error.kind == .unsupported)
        }
        #expect(client.inFlightCount == 0)
        await client.shutdown()
    }

    @Test func subscriptionsMadeBeforeStartAreSentOnConnectAndRunEndsOnCancel() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try MQTTClient(
            configuration: S.configuration(port: broker.port, id: S.uniqueID("early")), logger: S.logger)
        let subscribed = Task { try await client.subscribe(MQTTSubscription("early/#", qos: .atLeastOnce)) }
        try await Task.sleep(for: .milliseconds(50))
        let running = Task { await client.run() }
        #expect(try await subscribed.value == .atLeastOnce)
        try await client.publish(.text("early/a", "hello"))
        #expect(await S.receive(1, from: client).map(\.text) == ["hello"])
        running.cancel()
        await running.value
        #expect(client.state == .stopped(error: nil))
    }

    @Test func repeatedStartAndShutdownLeavesNoConnectionOpen() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        for round in 0..<20 {
            let client = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("cycle\(round)")))
            try await client.publish(.text("cycle/\(round)", "x"))
            await client.shutdown()
        }
        // Clients that are gone but never started release their handle too.
        for round in 0..<20 {
            _ = try MQTTClient(configuration: S.configuration(port: broker.port, id: S.uniqueID("unused\(round)")))
        }
        #expect(try Self.establishedConnections(toPort: broker.port) == 0)
    }

    /// ESTABLISHED TCP connections from this machine to 127.0.0.1:`port` (client side), from /proc/net/tcp.
    static func establishedConnections(toPort port: Int) throws -> Int {
        let table = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
        let remote = String(format: ":%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2].hasSuffix(remote) && fields[3] == "01"
        }.count
    }

    @Test func invalidTopicsAreRefusedWithAClearError() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let client = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("topics")))
        for topic in ["a/+/b", "a/#", ""] {
            do {
                try client.trySend(.text(topic, "x"))
                Issue.record("publish to \"\(topic)\" must fail")
            } catch {
                #expect(error.kind == .invalidArgument, "\(error)")
            }
        }
        for filter in ["a/#/b", "a/b#", ""] {
            do {
                try await client.subscribe(MQTTSubscription(filter))
                Issue.record("subscribe to \"\(filter)\" must fail")
            } catch let error as MQTTError {
                #expect(error.kind == .invalidArgument, "\(error)")
            }
        }
        #expect(client.inFlightCount == 0)
        // The client still works.
        try await client.subscribe(MQTTSubscription("ok/#"))
        try await client.publish(.text("ok/1", "fine"))
        #expect(await S.receive(1, from: client).map(\.text) == ["fine"])
        await client.shutdown()
    }

    @Test func invalidConfigurationListsEveryProblem() {
        var configuration = MQTTConfiguration(host: "", port: 0, clientID: "")
        configuration.keepAlive = .seconds(1)
        configuration.tls = MQTTTLSConfiguration(certificateFile: "/c.pem")
        do {
            _ = try MQTTClient(configuration: configuration)
            Issue.record("expected invalidConfiguration")
        } catch {
            #expect(error.kind == .invalidConfiguration)
            for word in ["host", "port", "client_id", "keepalive", "cert_file"] {
                #expect(error.message.contains(word), "missing \(word) in: \(error.message)")
            }
        }
    }
}
