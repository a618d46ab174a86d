import Foundation
import PusherLocal
import PusherProtocol
import Testing

/// The user-level protocol through a real pusher-local: sign-in over a WebSocket,
/// `#server-to-user-` delivery from the HTTP API, `terminate_connections`, the sign-in timeout,
/// watchlist events (docs/pusher-protocol.md §1, "User sign-in").
@Suite(.timeLimit(.minutes(1))) struct UserServerTests {
    static func signin(_ socket: TestSocket, socketID: String, userData: String, app: PusherLocalApp = .demo) async throws
        -> ReceivedEvent
    {
        let auth = PusherAuth.userAuth(key: app.key, secret: app.secret, socketID: socketID, userData: userData)
        socket.send("{\"event\":\"pusher:signin\",\"data\":{\"auth\":\(jsonQuoted(auth)),\"user_data\":\(jsonQuoted(userData))}}")
        return try await socket.nextEvent()
    }

    /// Signs in as `user` and subscribes to its `#server-to-user-` channel, as pusher-js does.
    static func signedIn(_ socket: TestSocket, _ user: String, watchlist: [String]? = nil) async throws -> String {
        let socketID = try await establish(socket)
        var userData = "{\"id\":\(jsonQuoted(user))"
        if let watchlist { userData += ",\"watchlist\":[" + watchlist.map(jsonQuoted).joined(separator: ",") + "]" }
        userData += "}"
        let reply = try await signin(socket, socketID: socketID, userData: userData)
        #expect(reply.event == "pusher:signin_success")
        #expect(reply.data?["user_data"] as? String == userData)
        socket.send("{\"event\":\"pusher:subscribe\",\"data\":{\"auth\":\"\",\"channel\":\"#server-to-user-\(user)\"}}")
        let succeeded = try await socket.waitFor("pusher_internal:subscription_succeeded")
        #expect(succeeded.channel == "#server-to-user-\(user)")
        return socketID
    }

    @Test func sendToUserAndTerminateConnections() async throws {
        try await withServer(testConfiguration()) { running in
            let url = running.webSocketURL()
            try await withSocket(url) { a in
                try await withSocket(url) { b in
                    try await withSocket(url) { other in
                        _ = try await Self.signedIn(a, "alice")
                        _ = try await Self.signedIn(b, "alice")
                        _ = try await Self.signedIn(other, "bob")
                        let body = ##"{"name":"note","data":"{\"n\":1}","channels":["#server-to-user-alice"]}"##
                        let sent = try await apiRequest(running, method: "POST", path: "/apps/1/events", body: body)
                        #expect(sent.status == 200)
                        for socket in [a, b] {
                            let event = try await socket.waitFor("note")
                            #expect(event.channel == "#server-to-user-alice")
                            #expect(event.dataString == "{\"n\":1}")
                        }
                        #expect(try await other.expectSilence() == nil)
                        let terminated = try await apiRequest(
                            running, method: "POST", path: "/apps/1/users/alice/terminate_connections", body: "{}")
                        #expect(terminated.status == 200)
                        #expect(terminated.body == "{}")
                        #expect(try await a.closeCode() == 4009)
                        #expect(try await b.closeCode() == 4009)
                        #expect(try await other.expectSilence() == nil)
                        let stats = try #require(running.stats())
                        #expect(stats.counters.connectionsTerminated == 2)
                        #expect(stats.counters.signins == 3)
                    }
                }
            }
            let bad = try await apiRequest(running, method: "POST", path: "/apps/1/users/a~b/terminate_connections", body: "{}")
            #expect(bad.status == 400)
            let badChannel = try await apiRequest(
                running, method: "POST", path: "/apps/1/events", body: ##"{"name":"e","data":"x","channels":["#server-to-user-"]}"##)
            #expect(badChannel.status == 400)
        }
    }

    @Test func connectionsThatDoNotSignInInTimeAreClosedWith4009() async throws {
        // A socket that signs in within the timeout keeps its connection; a silent one is closed
        // with 4009. The signed socket's half holds only if it did sign in within the timeout, which
        // a loaded machine can miss (then the server closes it too, rightly). The client measures
        // it from before the socket opens (the server's timer starts later, so that bound is safe)
        // and, when it was missed, tries again on a fresh server instead of judging a race.
        let timeout = Duration.milliseconds(500)
        var configuration = testConfiguration()
        configuration.users = PusherLocalUserSettings(signinTimeout: timeout)
        let clock = ContinuousClock()
        try await withFreshServerUntilJudged(configuration, "the signed socket never signed in within \(timeout) of opening") { running in
            let url = running.webSocketURL()
            let opening = clock.now
            return try await withSocket(url) { signed -> Duration? in
                let socketID = try await establish(signed)
                // Late, the server has closed the socket with 4009 and the reply never comes.
                let reply = try? await Self.signin(signed, socketID: socketID, userData: #"{"id":"u1"}"#)
                let took = clock.now - opening
                guard took < timeout else { return took }
                #expect(reply?.event == "pusher:signin_success")
                try await withSocket(url) { silent in
                    _ = try await establish(silent)
                    #expect(try await silent.closeCode(timeout: .seconds(5)) == 4009)
                    #expect(try await signed.expectSilence(for: .milliseconds(800)) == nil)
                    #expect(running.stats()?.counters.signinTimeouts == 1)
                }
                return nil
            }
        }
    }

    @Test func watchlistEventsPerApp() async throws {
        var configuration = testConfiguration()
        configuration.usersPerApp = ["1": PusherLocalUserSettings(watchlistEvents: true)]
        try await withServer(configuration) { running in
            let url = running.webSocketURL()
            try await withSocket(url) { watcher in
                try await withSocket(url) { early in
                    _ = try await Self.signedIn(early, "early")
                    let socketID = try await establish(watcher)
                    let reply = try await Self.signin(watcher, socketID: socketID, userData: #"{"id":"w","watchlist":["early","late"]}"#)
                    #expect(reply.event == "pusher:signin_success")
                    let initial = try await watcher.waitFor("pusher_internal:watchlist_events")
                    #expect(initial.dataString == #"{"events":[{"name":"online","user_ids":["early"]}]}"#)
                    try await withSocket(url) { late in
                        _ = try await Self.signedIn(late, "late")
                        let online = try await watcher.waitFor("pusher_internal:watchlist_events")
                        #expect(online.dataString == #"{"events":[{"name":"online","user_ids":["late"]}]}"#)
                    }
                    let offline = try await watcher.waitFor("pusher_internal:watchlist_events")
                    #expect(offline.dataString == #"{"events":[{"name":"offline","user_ids":["late"]}]}"#)
                }
            }
        }
        #expect(configuration.userSettings(appID: "2").watchlistEvents == false)
        var wrong = configuration
        wrong.usersPerApp["9"] = PusherLocalUserSettings()
        wrong.users.signinTimeout = .zero
        #expect(wrong.problems.contains("user settings name app id 9, which is not served"))
        #expect(wrong.problems.contains("sign-in timeout must be positive"))
    }
}
