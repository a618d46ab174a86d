import Foundation
import PusherLocal
import PusherProtocol
import Testing

/// pusher-local started in-process on a free port, driven by real WebSocket and HTTP clients.
@Suite(.timeLimit(.minutes(1)))
struct ServerIntegrationTests {
    @Test func handshakePingAndPublicEventThroughTheSignedHTTPAPI() async throws {
        try await withServer(testConfiguration(activity: 7)) { running in
            #expect(running.port > 0)
            try await withSocket(running.webSocketURL()) { socket in
                let hello = try await socket.nextEvent()
                #expect(hello.event == "pusher:connection_established")
                let socketID = try #require(hello.data?["socket_id"] as? String)
                #expect(SocketID.isValid(socketID))
                #expect(hello.data?["activity_timeout"] as? Int == 7)

                socket.send("{\"event\":\"pusher:ping\",\"data\":{}}")
                #expect(try await socket.nextEvent().event == "pusher:pong")

                try await subscribe(socket, socketID: socketID, channel: "news")
                let reply = try await apiRequest(
                    running, method: "POST", path: "/apps/1/events",
                    body: "{\"name\":\"update\",\"channel\":\"news\",\"data\":\"{\\\"v\\\":1}\"}")
                #expect(reply.status == 200)
                #expect(reply.body == "{}")
                let event = try await socket.nextEvent()
                #expect(event.event == "update")
                #expect(event.channel == "news")
                #expect(event.dataString == "{\"v\":1}")
            }
        }
    }

    @Test func unknownKeyIsClosedWith4001() async throws {
        try await withServer(testConfiguration()) { running in
            let (frames, code) = try await withSocket(running.webSocketURL(key: "nope")) { socket in
                let code = try await socket.closeCode()
                return (socket.state.withLock { $0.frames }, code)
            }
            #expect(code == 4001)
            // pusher:error with the code comes first (as hosted Pusher does), then the close frame.
            #expect(frames.count == 1)
            if let first = frames.first {
                #expect(try ReceivedEvent(first).data?["code"] as? Int == 4001)
            }
        }
    }

    @Test func missingOrUnsupportedProtocolIsClosed() async throws {
        try await withServer(testConfiguration()) { running in
            let base = "ws://127.0.0.1:\(running.port)/app/app-key"
            #expect(try await withSocket(base) { try await $0.closeCode() } == 4008)
            #expect(try await withSocket(base + "?protocol=99") { try await $0.closeCode() } == 4007)
            #expect(try await withSocket(base + "?protocol=abc") { try await $0.closeCode() } == 4007)
            // pysher speaks protocol 6: accepted.
            let event = try await withSocket(base + "?protocol=6&client=x") { try await $0.nextEvent().event }
            #expect(event == "pusher:connection_established")
        }
    }

    @Test func silentConnectionIsPingedThenClosedWith4201() async throws {
        try await withServer(testConfiguration(activity: 1, pong: 1)) { running in
            try await withSocket(running.webSocketURL()) { socket in
                _ = try await establish(socket)
                let ping = try await socket.nextEvent(timeout: .seconds(3))
                #expect(ping.event == "pusher:ping")
                #expect(try await socket.closeCode(timeout: .seconds(3)) == 4201)
            }
        }
    }

    @Test func answeringThePingKeepsTheConnection() async throws {
        // The server waits 1 s for the pong. A loaded machine can answer later (the CI rehearsal beside
        // two soaks did), and then the close with 4201 is right: that try is repeated on a fresh
        // server. A server that ignores pongs closes every try with 4201; any other end fails at once.
        try await withFreshServerUntilJudged(testConfiguration(activity: 1, pong: 1), "closed after 2 pings answered") { running in
            try await withSocket(running.webSocketURL()) { socket -> UInt16? in
                _ = try await establish(socket)
                for _ in 0..<2 {
                    guard let ping = try? await socket.nextEvent(timeout: .seconds(3)) else { break }
                    #expect(ping.event == "pusher:ping")
                    socket.send("{\"event\":\"pusher:pong\",\"data\":{}}")
                }
                if running.stats()?.connections == 1, socket.state.withLock({ !$0.ended }) { return nil }
                let code = try await socket.closeCode()
                #expect(code == 4201)
                return code
            }
        }
    }

    @Test func webSocketPingsAreAnswered() async throws {
        // The client pings every second and closes the connection if a pong is missing by the next
        // ping: two pings answered. The pong is read by the test's own reader task, which a loaded
        // machine can hold past the second; the client then rightly closes. Such a try is repeated
        // on a fresh server (5 tries); a server that never answers pings fails every try.
        try await withFreshServerUntilJudged(testConfiguration(), "the client closed for a missing WebSocket pong") { running in
            try await withSocket(running.webSocketURL(), autoPing: .seconds(1)) { socket -> String? in
                _ = try await establish(socket)
                try await Task.sleep(for: .milliseconds(2500))
                guard socket.state.withLock({ !$0.ended }) else { return "closed" }
                socket.send("{\"event\":\"pusher:ping\",\"data\":{}}")
                #expect(try await socket.nextEvent().event == "pusher:pong")
                return nil
            }
        }
    }

    @Test func eventsInfoReportsCounts() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { socket in
                let id = try await establish(socket)
                try await subscribe(socket, socketID: id, channel: "presence-info", userID: "u1")
                let body =
                    "{\"name\":\"e\",\"channels\":[\"presence-info\",\"empty\"],\"data\":\"d\",\"info\":\"user_count,subscription_count\"}"
                let reply = try await apiRequest(running, method: "POST", path: "/apps/1/events", body: body)
                #expect(
                    reply.body
                        == "{\"channels\":{\"presence-info\":{\"user_count\":1,\"subscription_count\":1},\"empty\":{\"subscription_count\":0}}}"
                )
            }
        }
    }

    @Test func wrongSignatureOrOldTimestampOrBadBodyMD5Gets401() async throws {
        try await withServer(testConfiguration()) { running in
            let body = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"d\"}"
            let wrong = try await apiRequest(running, method: "POST", path: "/apps/1/events", body: body, secret: "not-the-secret")
            #expect(wrong.status == 401)
            #expect(wrong.body.contains("Invalid signature"))
            let old = try await apiRequest(
                running, method: "POST", path: "/apps/1/events", body: body, timestamp: Int(Date().timeIntervalSince1970) - 601)
            #expect(old.status == 401)
            #expect(old.body.contains("Timestamp expired"))
            // Signed for one body, sent with another.
            let app = running.app
            let signed = RequestSignature(key: app.key, secret: app.secret).signedParameters(
                method: "POST", path: "/apps/1/events", body: Array(body.utf8), timestamp: Int(Date().timeIntervalSince1970))
            let query = signed.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
            let tampered = try await rawRequest(
                running, method: "POST", target: "/apps/1/events?" + query, body: body.replacingOccurrences(of: "\"d\"", with: "\"x\""))
            #expect(tampered.status == 401)
            #expect(tampered.body.contains("body_md5"))
            let unsigned = try await rawRequest(running, method: "POST", target: "/apps/1/events", body: body)
            #expect(unsigned.status == 401)
            // Unknown app id.
            #expect(try await apiRequest(running, method: "POST", path: "/apps/99/events", body: body).status == 404)
        }
    }

    @Test func limitsAnswer400And413() async throws {
        try await withServer(testConfiguration()) { running async throws in
            let tooMany = "{\"name\":\"e\",\"channels\":[" + (0...100).map { "\"c\($0)\"" }.joined(separator: ",") + "],\"data\":\"d\"}"
            #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: tooMany).status == 400)
            let big = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"" + String(repeating: "x", count: 10 * 1024 + 1) + "\"}"
            #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: big).status == 413)
            let badName = "{\"name\":\"e\",\"channel\":\"bad channel\",\"data\":\"d\"}"
            #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: badName).status == 400)
            let notJSON = "{\"name\":"
            #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: notJSON).status == 400)
            let batch =
                "{\"batch\":[" + (0...10).map { _ in "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"d\"}" }.joined(separator: ",") + "]}"
            #expect(try await apiRequest(running, method: "POST", path: "/apps/1/batch_events", body: batch).status == 400)
        }
    }

    @Test("the quota switch makes events and batch_events answer 403 Over quota, nothing is published, queries still answer")
    func quotaSwitchRefusesPublishesWith403() async throws {
        try await withServer(testConfiguration()) { running async throws in
            try await withSocket(running.webSocketURL()) { socket async throws in
                let id = try await establish(socket)
                try await subscribe(socket, socketID: id, channel: "room")
                let event = "{\"name\":\"e\",\"channel\":\"room\",\"data\":\"refused\"}"
                let batch = "{\"batch\":[{\"name\":\"e\",\"channel\":\"room\",\"data\":\"refused\"}]}"
                let on = try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/quota?exceeded=true")
                #expect(on.status == 200)
                #expect(on.body == "{\"quota_exceeded\":true}")
                let refused = try await apiRequest(running, method: "POST", path: "/apps/1/events", body: event)
                #expect(refused.status == 403)
                #expect(refused.body.hasPrefix("Over quota"))
                #expect(try await apiRequest(running, method: "POST", path: "/apps/1/batch_events", body: batch).status == 403)
                #expect(try await apiRequest(running, method: "GET", path: "/apps/1/channels").status == 200)
                // A bad signature is still a 401: the quota is checked after it.
                #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: event, secret: "wrong").status == 401)
                #expect(try await socket.expectSilence() == nil)
                #expect(running.stats()?.counters.eventsPublished == 0)

                #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/quota?exceeded=false").status == 200)
                let accepted = "{\"name\":\"e\",\"channel\":\"room\",\"data\":\"accepted\"}"
                #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: accepted).status == 200)
                #expect(try await socket.nextEvent().dataString == "accepted")

                // The Swift switch does the same.
                running.setQuotaExceeded(true)
                #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: accepted).status == 403)
                running.setQuotaExceeded(false)
                #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: accepted).status == 200)
            }
        }
    }

    @Test("the quota switch needs exceeded=true or exceeded=false and a known app")
    func quotaSwitchBadInput() async throws {
        try await withServer(testConfiguration()) { running async throws in
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/quota").status == 400)
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/quota?exceeded=yes").status == 400)
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/9/quota?exceeded=true").status == 404)
            #expect(try await rawRequest(running, method: "GET", target: "/pusher-local/apps/1/quota?exceeded=true").status == 404)
        }
    }

    @Test func socketIDExclusionAndBatchEvents() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { a in
                try await withSocket(running.webSocketURL()) { b in
                    let idA = try await establish(a)
                    let idB = try await establish(b)
                    try await subscribe(a, socketID: idA, channel: "room")
                    try await subscribe(b, socketID: idB, channel: "room")
                    let body = "{\"name\":\"e\",\"channels\":[\"room\"],\"data\":\"excluded\",\"socket_id\":\"\(idA)\"}"
                    #expect(try await apiRequest(running, method: "POST", path: "/apps/1/events", body: body).status == 200)
                    #expect(try await b.nextEvent().dataString == "excluded")
                    #expect(try await a.expectSilence() == nil)

                    let batch =
                        "{\"batch\":[{\"name\":\"one\",\"channel\":\"room\",\"data\":\"1\"},{\"name\":\"two\",\"channel\":\"room\",\"data\":\"2\",\"info\":\"subscription_count\"}]}"
                    let reply = try await apiRequest(running, method: "POST", path: "/apps/1/batch_events", body: batch)
                    #expect(reply.status == 200)
                    #expect(reply.body == "{\"batch\":[{},{\"subscription_count\":2}]}")
                    #expect(try await a.nextEvent().event == "one")
                    #expect(try await a.nextEvent().event == "two")
                }
            }
        }
    }

    @Test func channelQueries() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { a in
                let id = try await establish(a)
                try await subscribe(a, socketID: id, channel: "presence-team", userID: "ann")
                try await subscribe(a, socketID: id, channel: "news")
                let all = try await apiRequest(running, method: "GET", path: "/apps/1/channels")
                #expect(all.body == "{\"channels\":{\"news\":{},\"presence-team\":{}}}")
                let presence = try await apiRequest(
                    running, method: "GET", path: "/apps/1/channels", params: [("filter_by_prefix", "presence-"), ("info", "user_count")])
                #expect(presence.body == "{\"channels\":{\"presence-team\":{\"user_count\":1}}}")
                // Channel discovery polls with subscription_count (docs/contract.md §7.1).
                let counted = try await apiRequest(
                    running, method: "GET", path: "/apps/1/channels", params: [("filter_by_prefix", "ne"), ("info", "subscription_count")])
                #expect(counted.body == "{\"channels\":{\"news\":{\"subscription_count\":1}}}")
                #expect(
                    try await apiRequest(running, method: "GET", path: "/apps/1/channels", params: [("info", "user_count")]).status == 400)
                let one = try await apiRequest(
                    running, method: "GET", path: "/apps/1/channels/presence-team", params: [("info", "user_count,subscription_count")])
                #expect(one.body == "{\"occupied\":true,\"user_count\":1,\"subscription_count\":1}")
                let empty = try await apiRequest(running, method: "GET", path: "/apps/1/channels/nobody")
                #expect(empty.body == "{\"occupied\":false}")
                let users = try await apiRequest(running, method: "GET", path: "/apps/1/channels/presence-team/users")
                #expect(users.body == "{\"users\":[{\"id\":\"ann\"}]}")
                #expect(try await apiRequest(running, method: "GET", path: "/apps/1/channels/news/users").status == 400)
            }
        }
    }

    @Test func presenceMembersAndClientEventsBetweenTwoClients() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { a in
                let idA = try await establish(a)
                let joined = try await subscribe(a, socketID: idA, channel: "presence-room", userID: "alice")
                let presence = try #require(joined.data?["presence"] as? [String: Any])
                #expect(presence["ids"] as? [String] == ["alice"])
                try await withSocket(running.webSocketURL()) { b in
                    let idB = try await establish(b)
                    try await subscribe(b, socketID: idB, channel: "presence-room", userID: "bob")
                    let added = try await a.nextEvent()
                    #expect(added.event == "pusher_internal:member_added")
                    #expect(added.data?["user_id"] as? String == "bob")

                    b.send("{\"event\":\"client-wave\",\"channel\":\"presence-room\",\"data\":{\"hand\":\"left\"}}")
                    let wave = try await a.nextEvent()
                    #expect(wave.event == "client-wave")
                    #expect(wave.userID == "bob")
                    #expect(wave.data?["hand"] as? String == "left")
                    #expect(try await b.expectSilence() == nil)
                }
                let removed = try await a.nextEvent()
                #expect(removed.event == "pusher_internal:member_removed")
                #expect(removed.data?["user_id"] as? String == "bob")
            }
        }
    }

    @Test func largeEventsPassTheWebSocketFrameLimit() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { socket in
                let id = try await establish(socket)
                try await subscribe(socket, socketID: id, channel: "big")
                // 10 KB of quotes: ~20 KB once escaped, over swift-websocket's 16 KiB default.
                let data = String(repeating: "\"", count: 10 * 1024)
                try running.publish(PublishRequest(name: "e", data: data, channels: ["big"]))
                #expect(try await socket.nextEvent().dataString == data)
            }
        }
    }

    @Test func controlDisconnectRawFramePingSwitchAndRefusal() async throws {
        try await withServer(testConfiguration()) { running in
            // disconnect with 4200 over HTTP
            try await withSocket(running.webSocketURL()) { socket in
                _ = try await establish(socket)
                let reply = try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/disconnect?code=4200")
                #expect(reply.body == "{\"closed\":1}")
                #expect(try await socket.closeCode() == 4200)
            }
            // raw malformed frame, and ping switch
            try await withSocket(running.webSocketURL()) { socket in
                _ = try await establish(socket)
                #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/raw", body: "{not json").status == 200)
                #expect(try await socket.next() == "{not json")
                // Invalid UTF-8 is sent too (the interop suite checks the bytes; swift-websocket repairs them).
                #expect(running.sendRaw([0x7B, 0xFF, 0xFE]) == 1)
                #expect(try await socket.next() == "{\u{FFFD}\u{FFFD}")
                #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/pings?answer=false").status == 200)
                socket.send("{\"event\":\"pusher:ping\",\"data\":{}}")
                #expect(try await socket.expectSilence() == nil)
                running.setAnswersPings(true)
                socket.send("{\"event\":\"pusher:ping\",\"data\":{}}")
                #expect(try await socket.nextEvent().event == "pusher:pong")
            }
            // refuse new connections with 4001, then accept again
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/refuse?code=4001").status == 200)
            let openedBefore = running.stats()?.counters.connectionsOpened ?? -1
            #expect(try await withSocket(running.webSocketURL()) { try await $0.closeCode() } == 4001)
            // Refused attempts are counted, so tests can detect a reconnect loop.
            #expect(running.stats()?.counters.connectionsOpened == openedBefore + 1)
            #expect(running.stats()?.counters.connectionsRefused == 1)
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/accept").status == 200)
            #expect(try await withSocket(running.webSocketURL()) { try await $0.nextEvent().event } == "pusher:connection_established")
            // the other app was never affected
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/disconnect?code=99").status == 400)
        }
    }

    @Test func generatedStreamAndStats() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL()) { socket in
                let id = try await establish(socket)
                try await subscribe(socket, socketID: id, channel: "bench")
                let reply = try await rawRequest(
                    running, method: "POST", target: "/pusher-local/apps/1/stream?channel=bench&count=50&size=200")
                #expect(reply.status == 200)
                #expect(reply.body.contains("\"sent\":50"))
                for seq in 0..<50 {
                    let event = try await socket.nextEvent()
                    #expect(event.data?["seq"] as? Int == seq)
                    #expect((event.data?["sent_at_ns"] as? Int ?? 0) > 1_700_000_000_000_000_000)
                    #expect(event.dataString?.utf8.count == 200)
                }
                let stats = try await rawRequest(running, method: "GET", target: "/pusher-local/apps/1/stats")
                #expect(stats.body.contains("\"connections\":1"))
                #expect(stats.body.contains("\"subscriptions\":{\"bench\":1}"))
                #expect(stats.body.contains("\"events_delivered\":50"))
            }
        }
    }

    @Test func portInUseFailsInsteadOfHanging() async throws {
        try await withServer(testConfiguration()) { running in
            var taken = testConfiguration()
            taken.port = running.port
            await #expect(throws: (any Error).self) {
                try await withServer(taken) { _ in }
            }
        }
    }

    @Test func invalidConfigurationIsRefused() async throws {
        var configuration = testConfiguration()
        configuration.apps = []
        await #expect(throws: PusherLocalError.self) {
            try await withServer(configuration) { _ in }
        }
    }

    @Test func controlEndpointsCanBeTurnedOff() async throws {
        var configuration = testConfiguration()
        configuration.controlEnabled = false
        try await withServer(configuration) { running async throws in
            #expect(try await rawRequest(running, method: "GET", target: "/pusher-local/apps/1/stats").status == 404)
        }
    }

    @Test func secondAppIsSeparate() async throws {
        try await withServer(testConfiguration()) { running in
            try await withSocket(running.webSocketURL(key: "other-key")) { socket in
                let id = try await establish(socket)
                try await subscribe(
                    socket, socketID: id, channel: "private-x", app: PusherLocalApp(id: "2", key: "other-key", secret: "other-secret"))
                #expect(running.stats(appID: "2")?.subscriptions == ["private-x": 1])
                #expect(running.stats(appID: "1")?.connections == 0)
            }
        }
    }
}
