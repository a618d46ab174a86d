import Locking
import MQTTVocabulary
import TestSupport
import Testing

@testable import MosquittoClient

/// `MQTTClient.handleCompletions`: outcomes of `send`/`trySend` go to a handler in batches,
/// in order, instead of the `completions` stream.
@Suite(.timeLimit(.minutes(1))) struct CompletionHandlerTests {
    typealias S = ClientSupport

    @Test(arguments: [MQTTQoS.atMostOnce, .atLeastOnce])
    func everyOutcomeReachesTheHandlerOnceAndInOrder(qos: MQTTQoS) async throws {
        let broker = try Mosquitto()
        try await broker.start()
        var configuration = S.configuration(port: broker.port, id: S.uniqueID("pub"))
        configuration.maxInFlight = 20
        let publisher = try await S.connectedClient(configuration)
        let seen = Locked<[MQTTPublishCompletion]>([])
        let batches = Locked(0)
        publisher.handleCompletions { batch in
            #expect(!batch.isEmpty)
            seen.withLock { $0 += batch }
            batches.withLock { $0 += 1 }
        }
        var ids: [MQTTPublishID] = []
        for n in 0..<500 {
            ids.append(try await publisher.send(.text("handled/\(n % 5)", "\(n)", qos: qos)))
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while seen.withLock({ $0.count }) < ids.count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let completions = seen.withLock { $0 }
        #expect(completions.map(\.id) == ids)
        #expect(completions.allSatisfy { $0.error == nil && $0.qos == qos })
        #expect(batches.withLock { $0 } <= ids.count)
        #expect(publisher.inFlightCount == 0)
        await publisher.shutdown()
    }

    @Test func shutdownFailsWhatIsUnacknowledgedThroughTheHandlerAndNothingGoesToTheStream() async throws {
        let broker = try Mosquitto()  // never started: the publishes wait in the window
        let client = try MQTTClient(configuration: S.configuration(port: broker.port, id: S.uniqueID("down")), logger: S.logger)
        let failed = Locked<[MQTTPublishCompletion]>([])
        client.handleCompletions { batch in failed.withLock { $0 += batch } }
        client.start()
        var ids: [MQTTPublishID] = []
        for n in 0..<5 { ids.append(try client.trySend(.text("stuck/\(n)", "\(n)"))) }
        await client.shutdown()
        let completions = failed.withLock { $0 }
        #expect(Set(completions.map(\.id)) == Set(ids))
        #expect(completions.allSatisfy { $0.error?.kind == .shutdown })
        var streamed = 0
        for await _ in client.completions { streamed += 1 }
        #expect(streamed == 0)
    }

    /// The property list is kept for the next publish with the same properties: a change, and
    /// a publish without properties in between, are sent as they are.
    @Test func eachPublishCarriesItsOwnPropertiesWhenTheListIsReused() async throws {
        let broker = try Mosquitto()
        try await broker.start()
        let subscriber = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("sub")))
        try await subscriber.subscribe(MQTTSubscription("reuse/#", qos: .atLeastOnce))
        let publisher = try await S.connectedClient(S.configuration(port: broker.port, id: S.uniqueID("pub")))
        func properties(_ event: String) -> MQTTPublishProperties {
            MQTTPublishProperties(userProperties: [MQTTUserProperty("pusher-channel", "c"), MQTTUserProperty("pusher-event", event)])
        }
        let events = ["a", "a", "b", "a", "", "a"]
        for (n, event) in events.enumerated() {
            let message = MQTTMessage(
                topic: "reuse/\(n)", payload: Array(event.utf8), qos: .atLeastOnce,
                properties: event.isEmpty ? MQTTPublishProperties() : properties(event))
            try await publisher.publish(message)
        }
        let received = await S.receive(events.count, from: subscriber)
        #expect(received.map(\.properties) == events.map { $0.isEmpty ? MQTTPublishProperties() : properties($0) })
        await publisher.shutdown()
        await subscriber.shutdown()
    }
}
