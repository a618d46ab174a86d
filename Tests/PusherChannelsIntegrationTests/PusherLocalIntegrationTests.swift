import Backoff
import Foundation
import Logging
import PusherLocal
import PusherProtocol
import Synchronization
import TestSupport
import Testing

@testable import PusherChannels

/// Our client and HTTP API client against an in-process pusher-local (docs/contract.md §6): every channel
/// kind, socket_id exclusion, cache replay, client events, reconnect after a server close and
/// after a missing pong, presence without duplicates.
@Suite(.timeLimit(.minutes(1))) struct PusherLocalIntegrationTests {
    static let masterKey = [UInt8]((0..<32).map { UInt8($0 * 7 % 256) })

    static func quiet(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = ProcessInfo.processInfo.environment["PUSHER_TEST_LOG"] == nil ? .critical : .debug
        return logger
    }

    static func withLocal<T: Sendable>(
        activityTimeout: Duration = .seconds(120),
        _ body: @Sendable (LocalUnderTest) async throws -> T
    ) async throws -> T {
        try await PusherLocalServer.withRunning(
            PusherLocalConfiguration(port: 0, activityTimeout: activityTimeout),
            logger: quiet("pusher-local")
        ) { local in
            // HTTP API calls use a pool of this test only, closed before pusher-local stops
            // (an idle keep-alive connection can hold up its graceful shutdown).
            let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 8)
            do {
                let result = try await body(local.withHTTP(http))
                await http.shutdown()
                return result
            } catch {
                await http.shutdown()
                throw error
            }
        }
    }

    static func client(_ local: LocalUnderTest, userID: String, activity: Duration = .seconds(120), pong: Duration = .seconds(30))
        throws -> PusherClient
    {
        let signer = try PusherInlineSigner(
            key: local.app.key,
            secret: local.app.secret,
            userID: userID,
            userInfoJSON: #"{"name":"\#(userID)"}"#,
            encryptionMasterKeyBase64: Data(masterKey).base64EncodedString()
        )
        return PusherClient(
            options: PusherClientOptions(
                key: local.app.key,
                host: .host(local.host, port: local.port),
                encrypted: false,
                activityTimeout: activity,
                pongTimeout: pong,
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0.2),
                authorization: .inline(signer)
            ),
            logger: quiet("pusher-client-\(userID)")
        )
    }

    static func api(_ local: LocalUnderTest) -> PusherHTTPClient {
        PusherHTTPClient(
            appID: local.app.id,
            key: local.app.key,
            secret: local.app.secret,
            host: .host(local.host, port: local.port),
            encrypted: false,
            timeout: .seconds(5 * testTimeScale),
            encryptionMasterKey: masterKey,
            connectionPool: local.http
        )
    }

    static func isEvent(_ update: PusherUpdate, channel: String, name: String) -> Bool {
        if case .event(let e) = update { return e.channel == channel && e.name == name }
        return false
    }

    @Test func everyChannelKindDeliversEventsTriggeredThroughTheHTTPAPI() async throws {
        try await Self.withLocal { local in
            let client = try Self.client(local, userID: "bridge")
            let api = Self.api(local)
            let updates = client.updates()
            let channels = ["news", "private-orders", "presence-ops", "private-encrypted-secrets", "cache-prices"]
            for channel in channels { client.subscribe(channel) }
            try await withRunningClient(client) { client in
                client.connect()
                let setup = try await collect(updates, "subscriptions and cache miss") { seen in
                    // The presence update is a separate update from the channel's subscriptionSucceeded
                    // and may come after it: wait for it too.
                    seen.filter { if case .subscriptionSucceeded = $0 { true } else { false } }.count == 5
                        && seen.contains { Self.isEvent($0, channel: "cache-prices", name: "pusher:cache_miss") }
                        && seen.contains { if case .presence(.subscriptionSucceeded) = $0 { true } else { false } }
                }
                #expect(!setup.contains { if case .subscriptionFailed = $0 { true } else { false } })
                let presence = setup.compactMap {
                    if case .presence(.subscriptionSucceeded(_, let m, let me)) = $0 { (m, me) } else { nil }
                }
                #expect(presence.first?.0 == [PusherMember(userID: "bridge", userInfo: #"{"name":"bridge"}"#)])
                #expect(presence.first?.1?.userID == "bridge")

                for channel in channels {
                    try await api.trigger(channels: [channel], event: "update", data: #"{"on":"\#(channel)","text":"é \"q\""}"#)
                }
                let seen = try await collect(updates, "an event on every channel") { seen in
                    channels.allSatisfy { channel in seen.contains { Self.isEvent($0, channel: channel, name: "update") } }
                }
                for channel in channels {
                    let event = seen.compactMap { if case .event(let e) = $0, e.channel == channel, e.name == "update" { e } else { nil } }
                    // Byte for byte, and decrypted on the encrypted channel.
                    #expect(event.map(\.data) == [#"{"on":"\#(channel)","text":"é \"q\""}"#])
                }

                // socket_id exclusion: the event sent with our socket id does not come back.
                let socketID = try #require(client.socketID)
                try await api.trigger(channels: ["news"], event: "echo", data: "1", socketID: socketID)
                try await api.trigger(channels: ["news"], event: "after-echo", data: "2")
                let after = try await collect(updates, "after-echo") { seen in
                    seen.contains { Self.isEvent($0, channel: "news", name: "after-echo") }
                }
                #expect(!after.contains { Self.isEvent($0, channel: "news", name: "echo") })

                // Batch trigger, including the encrypted channel.
                try await api.triggerBatch([
                    PusherBatchEvent(channel: "news", name: "b1", data: "x"),
                    PusherBatchEvent(channel: "private-encrypted-secrets", name: "b2", data: "y"),
                ])
                let batch = try await collect(updates, "batch") { seen in
                    seen.contains(.event(PusherEvent(name: "b2", channel: "private-encrypted-secrets", data: "y")))
                }
                #expect(batch.contains(.event(PusherEvent(name: "b1", channel: "news", data: "x"))))
            }

            // A new subscriber of the cache channel gets the last event replayed.
            let late = try Self.client(local, userID: "late")
            let lateEvents = late.subscribe("cache-prices").events()
            try await withRunningClient(late) { late in
                late.connect()
                let replay = try await withTimeout(5, "cache replay") {
                    for await event in lateEvents { return event }
                    throw TestFailure("stream ended")
                }
                #expect(replay.name == "update")
                #expect(replay.data == #"{"on":"cache-prices","text":"é \"q\""}"#)
            }
        }
    }

    @Test func reconnectsAfterAServerCloseWithNewSocketAndNoPresenceDuplicates() async throws {
        try await Self.withLocal { local in
            let watcher = try Self.client(local, userID: "bridge")
            let member = try Self.client(local, userID: "alice")
            let updates = watcher.updates()
            watcher.subscribe("presence-ops")
            member.subscribe("presence-ops")
            try await withRunningClient(watcher) { watcher in
                try await withRunningClient(member) { member in
                    watcher.connect()
                    _ = try await collect(updates, "watcher subscribed") { seen in
                        seen.contains { if case .presence(.subscriptionSucceeded) = $0 { true } else { false } }
                    }
                    member.connect()
                    _ = try await collect(updates, "alice added") { seen in
                        seen.contains { if case .presence(.memberAdded(_, let m)) = $0 { m.userID == "alice" } else { false } }
                    }
                    let firstSocket = try #require(watcher.socketID)

                    #expect(local.disconnectAll(code: 4200) == 2)
                    // After the reconnect the list is rebuilt: either alice is in the new
                    // subscription_succeeded list, or (if she came back later) added after it.
                    let again = try await collect(updates, "resubscribed with both members") { seen in
                        guard let index = seen.firstIndex(where: { if case .presence(.subscriptionSucceeded) = $0 { true } else { false } })
                        else { return false }
                        return seen[index...].contains {
                            switch $0 {
                            case .presence(.subscriptionSucceeded(_, let members, _)): members.count == 2
                            case .presence(.memberAdded(_, let member)): member.userID == "alice"
                            default: false
                            }
                        }
                    }
                    let states = again.compactMap { if case .connectionStateChanged(let s) = $0 { s.current } else { nil } }
                    #expect(states.contains(.connected))
                    let members = watcher.subscribeToPresenceChannel("presence-ops").members.map(\.userID).sorted()
                    #expect(members == ["alice", "bridge"])
                    #expect(watcher.socketID != firstSocket)

                    try await Self.api(local).trigger(channels: ["presence-ops"], event: "after", data: "ok")
                    _ = try await collect(updates, "event after reconnect") { seen in
                        seen.contains(.event(PusherEvent(name: "after", channel: "presence-ops", data: "ok")))
                    }

                    // Client events between the two, with the sender's user id; never echoed.
                    try member.trigger(channel: "presence-ops", event: "client-wave", data: #"{"hi":1}"#)
                    let wave = try await collect(updates, "client event") { seen in
                        seen.contains { Self.isEvent($0, channel: "presence-ops", name: "client-wave") }
                    }
                    #expect(
                        wave.contains(
                            .event(PusherEvent(name: "client-wave", channel: "presence-ops", data: #"{"hi":1}"#, userID: "alice"))))

                    member.disconnect()
                    _ = try await collect(updates, "alice removed") { seen in
                        seen.contains { if case .presence(.memberRemoved(_, let m)) = $0 { m.userID == "alice" } else { false } }
                    }
                    #expect(watcher.subscribeToPresenceChannel("presence-ops").members.map(\.userID) == ["bridge"])
                }
            }
        }
    }

    @Test func reconnectsWhenTheServerStopsAnsweringPings() async throws {
        // pusher-local keeps its own (default, 120 s) activity timeout: with 1 s it pinged the
        // silent client every second, and any frame answers the client's ping (docs/pusher-protocol.md
        // §1 "Keep-alive"), so whenever the server's ping reached the client before the client's
        // pong deadline the client rightly kept the connection: both sides pinged in lockstep, and
        // under load the race could go the server's way round after round past the 15 s wait.
        try await Self.withLocal { local in
            let client = try Self.client(local, userID: "bridge", activity: .seconds(1), pong: .seconds(1))
            let updates = client.updates()
            client.subscribe("news")
            try await withRunningClient(client) { client in
                client.connect()
                _ = try await collect(updates, "subscribed") { seen in seen.contains(.subscriptionSucceeded(channel: "news")) }
                let firstSocket = client.socketID
                local.setAnswersPings(false)
                let seen = try await collect(updates, "reconnected after pong timeout") { seen in
                    seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .connected } else { false } }
                }
                #expect(seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .reconnecting } else { false } })
                local.setAnswersPings(true)
                _ = try await collect(updates, "resubscribed") { seen in seen.contains(.subscriptionSucceeded(channel: "news")) }
                #expect(client.socketID != firstSocket)
            }
        }
    }

    @Test func refusedConnectionsAreReported() async throws {
        try await Self.withLocal { local in
            local.refuseConnections(code: 4001)
            let client = try Self.client(local, userID: "bridge")
            let errors = client.errors()
            let states = client.connectionStates()
            try await withRunningClient(client) { client in
                client.connect()
                let error = try await withTimeout(15, "refusal") {
                    for await error in errors where error.isConnectionRefused { return error }
                    throw TestFailure("stream ended")
                }
                #expect(error.pusherCode == 4001)
                // The client backs off and tries again: judged from its state changes (a fresh reading
                // taken a second late can see its next attempt, `connecting`).
                let seen = try await withTimeout(15, "reconnecting after the refusal") {
                    var seen: [PusherConnectionState] = []
                    for await change in states {
                        seen.append(change.current)
                        if change.current == .reconnecting { return seen }
                    }
                    throw TestFailure("state stream ended; saw \(seen)")
                }
                #expect(seen == [.connecting, .reconnecting])
            }
        }
    }
}

/// A running pusher-local plus the HTTP pool the test uses for its API.
@dynamicMemberLookup
struct LocalUnderTest: Sendable {
    let running: RunningPusherLocal
    let http: PusherHTTPConnectionPool
    subscript<T>(dynamicMember keyPath: KeyPath<RunningPusherLocal, T>) -> T { running[keyPath: keyPath] }
    func disconnectAll(code: UInt16) -> Int { running.disconnectAll(code: code) }
    func setAnswersPings(_ answer: Bool) { running.setAnswersPings(answer) }
    func refuseConnections(code: UInt16?) { running.refuseConnections(code: code) }
}

extension RunningPusherLocal {
    fileprivate func withHTTP(_ http: PusherHTTPConnectionPool) -> LocalUnderTest { LocalUnderTest(running: self, http: http) }
}
