import Backoff
import Foundation
import Logging
import PusherLocal
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// ``PusherClient/signIn()`` against an in-process pusher-local with watchlist events on
/// (docs/pusher-protocol.md §1 "User sign-in"): inline-signed and endpoint-signed sign-in,
/// events to the user from the HTTP API's `sendToUser`, watchlist online/offline, sign-in again
/// after a 4200 close, and `terminateUserConnections` closing only that user's connection.
@Suite(.timeLimit(.minutes(1))) struct SignInIntegrationTests {
    static func withLocal<T: Sendable>(_ body: @Sendable (LocalUnderTest) async throws -> T) async throws -> T {
        try await PusherLocalServer.withRunning(
            PusherLocalConfiguration(port: 0, users: PusherLocalUserSettings(watchlistEvents: true)),
            logger: PusherLocalIntegrationTests.quiet("pusher-local")
        ) { local in
            let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 4)
            do {
                let result = try await body(LocalUnderTest(running: local, http: http))
                await http.shutdown()
                return result
            } catch {
                await http.shutdown()
                throw error
            }
        }
    }

    static func client(_ local: LocalUnderTest, _ authentication: PusherUserAuthentication, label: String) -> PusherClient {
        PusherClient(
            options: PusherClientOptions(
                key: local.app.key,
                host: .host(local.host, port: local.port),
                encrypted: false,
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0.2),
                userAuthentication: authentication
            ),
            logger: PusherLocalIntegrationTests.quiet("pusher-client-\(label)")
        )
    }

    static func inline(_ local: LocalUnderTest, id: String, watchlist: [String] = []) throws -> PusherUserAuthentication {
        let signer = try PusherInlineSigner(key: local.app.key, secret: local.app.secret)
        return .inline(signer, userData: PusherUser.userData(id: id, userInfo: #"{"kind":"test"}"#, watchlist: watchlist))
    }

    static func signedIn(_ update: PusherUpdate) -> PusherUser? {
        if case .user(.signedIn(let user)) = update { return user }
        return nil
    }

    static func userEvent(_ update: PusherUpdate, named name: String) -> PusherEvent? {
        if case .user(.event(let event)) = update, event.name == name { return event }
        return nil
    }

    static func watchlist(_ update: PusherUpdate) -> PusherWatchlistEvent? {
        if case .user(.watchlist(let event)) = update { return event }
        return nil
    }

    @Test func signsInReceivesEventsToTheUserAndWatchesOthers() async throws {
        try await Self.withLocal { local in
            let watcher = Self.client(local, try Self.inline(local, id: "owner", watchlist: ["device-1", "device-2"]), label: "owner")
            let device = Self.client(local, try Self.inline(local, id: "device-1"), label: "device")
            let api = PusherLocalIntegrationTests.api(local)
            let updates = watcher.updates()
            watcher.signIn()
            try await withRunningClient(watcher) { watcher in
                watcher.connect()
                let first = try await collect(updates, "signed in and the user's channel subscribed") { seen in
                    seen.contains(.subscriptionSucceeded(channel: "#server-to-user-owner"))
                }
                let user = try #require(first.compactMap(Self.signedIn).first)
                #expect(user.id == "owner" && user.watchlist == ["device-1", "device-2"] && user.userInfo == #"{"kind":"test"}"#)
                #expect(watcher.user == user)

                try await api.sendToUser("owner", event: "command", data: #"{"do":"reboot"}"#)
                let event = try await collect(updates, "the event to the user") {
                    $0.contains { Self.userEvent($0, named: "command") != nil }
                }
                .compactMap { Self.userEvent($0, named: "command") }.first
                #expect(event?.data == #"{"do":"reboot"}"#)
                #expect(event?.channel == "#server-to-user-owner")

                device.signIn()
                try await withRunningClient(device) { device in
                    device.connect()
                    let online = try await collect(updates, "device-1 online") { seen in
                        seen.contains { Self.watchlist($0) == PusherWatchlistEvent(kind: .online, userIDs: ["device-1"]) }
                    }
                    #expect(!online.contains { Self.watchlist($0)?.userIDs.contains("device-2") == true })
                    await device.disconnectAndWait()
                }
                _ = try await collect(updates, "device-1 offline") { seen in
                    seen.contains { Self.watchlist($0) == PusherWatchlistEvent(kind: .offline, userIDs: ["device-1"]) }
                }
            }
        }
    }

    @Test func signsInAgainAfterAReconnectAndTerminationClosesOnlyThatUser() async throws {
        try await Self.withLocal { local in
            let owner = Self.client(local, try Self.inline(local, id: "owner"), label: "owner")
            let other = Self.client(local, try Self.inline(local, id: "other"), label: "other")
            let api = PusherLocalIntegrationTests.api(local)
            let updates = owner.updates()
            let otherUpdates = other.updates()
            owner.signIn()
            other.signIn()
            try await withRunningClient(owner) { owner in
                try await withRunningClient(other) { other in
                    owner.connect()
                    other.connect()
                    _ = try await collect(updates, "owner signed in") {
                        $0.contains(.subscriptionSucceeded(channel: "#server-to-user-owner"))
                    }
                    _ = try await collect(otherUpdates, "other signed in") {
                        $0.contains(.subscriptionSucceeded(channel: "#server-to-user-other"))
                    }
                    let firstSocket = try #require(owner.socketID)

                    #expect(local.disconnectAll(code: 4200) == 2)
                    let again = try await collect(updates, "signed in on the new connection") { seen in
                        seen.filter { $0 == .subscriptionSucceeded(channel: "#server-to-user-owner") }.count == 1
                            && seen.contains { Self.signedIn($0) != nil }
                    }
                    #expect(again.compactMap(Self.signedIn).map(\.id) == ["owner"])
                    #expect(owner.socketID != firstSocket)
                    try await api.sendToUser("owner", event: "after-reconnect", data: "1")
                    _ = try await collect(updates, "event after the reconnect") {
                        $0.contains { Self.userEvent($0, named: "after-reconnect") != nil }
                    }
                    _ = try await collect(otherUpdates, "other signed in again") { seen in
                        seen.contains(.subscriptionSucceeded(channel: "#server-to-user-other"))
                    }

                    try await api.terminateUserConnections("owner")
                    let closed = try await collect(updates, "owner's connection closed with 4009") { seen in
                        seen.contains { if case .error(let error) = $0 { error.pusherCode == 4009 } else { false } }
                    }
                    #expect(closed.contains { if case .error(let error) = $0 { error.isConnectionRefused } else { false } })
                    // The other user's connection stays: an event to it still arrives.
                    try await api.sendToUser("other", event: "still-here", data: "2")
                    _ = try await collect(otherUpdates, "other still connected") {
                        $0.contains { Self.userEvent($0, named: "still-here") != nil }
                    }
                    #expect(other.connectionState == .connected)
                }
            }
        }
    }

    @Test func anEndpointSignsTheUserAndARefusalIsReportedWithoutDroppingTheConnection() async throws {
        try await Self.withLocal { local in
            let api = PusherLocalIntegrationTests.api(local)
            let script: @Sendable (ScriptedRequest) -> ScriptedReply = { request in
                let body = String(decoding: request.body, as: UTF8.self)
                guard request.head.contains("Authorization: Bearer good"), body.hasPrefix("socket_id="),
                    let reply = try? api.authenticateUser(
                        socketID: String(body.dropFirst("socket_id=".count).prefix { $0 != "&" }), userID: "endpoint-user")
                else { return .send("HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\nno way", close: true) }
                return .send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(reply.utf8.count)\r\n\r\n\(reply)")
            }
            try await ScriptedHTTPServer.with(script) { _, endpoint in
                let url = "http://127.0.0.1:\(endpoint.port)/pusher/user-auth"
                let good = Self.client(local, .endpoint(url: url, headers: ["Authorization": "Bearer good"]), label: "good")
                let bad = Self.client(local, .endpoint(url: url, headers: ["Authorization": "Bearer bad"]), label: "bad")
                let goodUpdates = good.updates()
                let badUpdates = bad.updates()
                good.signIn()
                bad.signIn()
                try await withRunningClient(good) { good in
                    try await withRunningClient(bad) { bad in
                        good.connect()
                        bad.connect()
                        let signed = try await collect(goodUpdates, "signed in through the endpoint") { seen in
                            seen.contains(.subscriptionSucceeded(channel: "#server-to-user-endpoint-user"))
                        }
                        #expect(signed.compactMap(Self.signedIn).map(\.id) == ["endpoint-user"])
                        let refused = try await collect(badUpdates, "the refusal") { seen in
                            seen.contains { if case .user(.signInFailed) = $0 { true } else { false } }
                        }
                        guard case .user(.signInFailed(let error))? = refused.last else { return }
                        #expect(error.isSignInFailure)
                        #expect(error.message.contains("403"))
                        #expect(bad.connectionState == .connected)
                        #expect(bad.user == nil)
                    }
                }
            }
        }
    }

    @Test func aForgedSignatureIsRefusedByTheServer() async throws {
        try await Self.withLocal { local in
            let forged = try PusherInlineSigner(key: local.app.key, secret: "not-the-secret")
            let client = Self.client(local, .inline(forged, userData: PusherUser.userData(id: "mallory")), label: "forged")
            let updates = client.updates()
            client.signIn()
            try await withRunningClient(client) { client in
                client.connect()
                let seen = try await collect(updates, "the server's refusal") { seen in
                    seen.contains { if case .user(.signInFailed) = $0 { true } else { false } }
                }
                guard case .user(.signInFailed(let error))? = seen.last else { return }
                #expect(error.message.contains("server refused the sign-in"), "\(error)")
                #expect(client.user == nil)
                #expect(!seen.contains { Self.signedIn($0) != nil })
            }
        }
    }
}
