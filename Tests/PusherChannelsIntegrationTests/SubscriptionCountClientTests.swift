import Foundation
import PusherLocal
import TestSupport
import Testing

@testable import PusherChannels

/// `pusher:subscription_count` as typed values (``PusherEvent/subscriptionCount``,
/// ``PusherChannel/subscriptionCount``), channel lists with `subscription_count`, and
/// unsubscribing while connected and while disconnected, against pusher-local with
/// `subscriptionCountEvents` on.
@Suite(.timeLimit(.minutes(1))) struct SubscriptionCountClientTests {
    @Test(arguments: [
        ("pusher:subscription_count", #"{"subscription_count":3}"#, 3 as Int?),
        ("pusher:subscription_count", #"{"subscription_count":"12"}"#, 12),
        ("pusher:subscription_count", #"{"subscription_count":0}"#, 0),
        ("pusher:subscription_count", #"{"subscription_count":-1}"#, nil),
        ("pusher:subscription_count", #"{"subscription_count":1.5}"#, nil),
        ("pusher:subscription_count", #"{"count":3}"#, nil),
        ("pusher:subscription_count", "not json", nil),
        ("update", #"{"subscription_count":3}"#, nil),
    ])
    func eventDataIsReadOnlyForSubscriptionCountEvents(name: String, data: String, expected: Int?) {
        #expect(PusherEvent(name: name, channel: "c", data: data).subscriptionCount == expected)
        #expect(PusherEvent(name: name, channel: "c", data: nil).subscriptionCount == nil)
    }

    static func withCountingLocal(_ body: @Sendable (LocalUnderTest) async throws -> Void) async throws {
        var configuration = PusherLocalConfiguration(port: 0)
        configuration.subscriptionCountEvents = true
        try await PusherLocalServer.withRunning(configuration, logger: PusherLocalIntegrationTests.quiet("pusher-local")) { local in
            let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 8)
            do {
                try await body(LocalUnderTest(running: local, http: http))
                await http.shutdown()
            } catch {
                await http.shutdown()
                throw error
            }
        }
    }

    static func counts(_ updates: [PusherUpdate], channel: String) -> [Int] {
        updates.compactMap { if case .event(let e) = $0, e.channel == channel { e.subscriptionCount } else { nil } }
    }

    static func occupied(_ local: LocalUnderTest, _ channel: String) -> Int { local.running.stats()?.subscriptions[channel] ?? 0 }

    @Test func countsArriveAsTypedValuesAndUnsubscribeWorksConnectedAndDisconnected() async throws {
        try await Self.withCountingLocal { local in
            let device = "private-device-0001"
            let watcher = try PusherLocalIntegrationTests.client(local, userID: "watcher")
            let other = try PusherLocalIntegrationTests.client(local, userID: "other")
            let api = PusherLocalIntegrationTests.api(local)
            let watcherUpdates = watcher.updates()
            let otherUpdates = other.updates()
            let channel = watcher.subscribe(device)
            #expect(channel.subscriptionCount == nil)
            try await withRunningClient(watcher) { watcher in
                watcher.connect()
                _ = try await collect(watcherUpdates, "count 1") { Self.counts($0, channel: device) == [1] }
                #expect(channel.subscriptionCount == 1)
                try await withRunningClient(other) { other in
                    other.subscribe(device)
                    other.subscribe("news")
                    other.connect()
                    _ = try await collect(watcherUpdates, "count 2") { Self.counts($0, channel: device) == [2] }
                    #expect(channel.subscriptionCount == 2)
                    _ = try await collect(otherUpdates, "other subscribed") { seen in
                        seen.filter { if case .subscriptionSucceeded = $0 { true } else { false } }.count == 2
                            && Self.counts(seen, channel: device) == [2]
                    }
                    #expect(other.channel(named: device)?.subscriptionCount == 2)

                    let listed = try await api.channels(prefix: "private-device-", info: ["subscription_count"])
                    #expect(listed.keys.sorted() == [device])
                    #expect(listed[device]?.subscriptionCount == 2)

                    // Unsubscribing while connected: the server is told, the watcher hears 1.
                    other.unsubscribe(device)
                    #expect(other.channel(named: device) == nil)
                    _ = try await collect(watcherUpdates, "count 1 again") { Self.counts($0, channel: device) == [1] }
                    #expect(channel.subscriptionCount == 1)
                    #expect(Self.occupied(local, device) == 1)

                    // Unsubscribing while disconnected: the channel is not sent again on connect.
                    other.disconnect()
                    try await waitUntil("other disconnected") { Self.occupied(local, "news") == 0 }
                    other.unsubscribe("news")
                    other.subscribe("private-device-0002")
                    other.unsubscribe("private-device-0002")
                    other.subscribe("marker")
                    #expect(other.channelNames == ["marker"])
                    other.connect()
                    try await waitUntil("marker subscribed") { Self.occupied(local, "marker") == 1 }
                    #expect(Self.occupied(local, "news") == 0)
                    #expect(Self.occupied(local, "private-device-0002") == 0)
                    let after = try await api.channels(prefix: "private-device-", info: ["subscription_count"])
                    #expect(after[device]?.subscriptionCount == 1)
                    #expect(after["private-device-0002"] == nil)
                }
            }
        }
    }
}
