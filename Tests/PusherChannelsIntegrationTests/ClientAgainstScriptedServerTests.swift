import Backoff
import Foundation
import Hummingbird
import Locking
import Logging
import NIOCore
import NIOSSL
import PusherProtocol
import ServiceLifecycle
import TestSupport
import Testing

@testable import PusherChannels

private let appKey = "test-key"
private let appSecret = "test-secret"

private func options(port: Int, tls: TestCertificates? = nil, activity: Duration = .seconds(120), pong: Duration = .seconds(30))
    throws -> PusherClientOptions
{
    PusherClientOptions(
        key: appKey,
        host: .host("127.0.0.1", port: port),
        encrypted: tls != nil,
        caFile: tls?.caFile,
        tlsServerName: tls != nil ? "localhost" : nil,
        activityTimeout: activity,
        pongTimeout: pong,
        // Scaled under TSan (testTimeScale): a whole-process stall of 5 s was seen there once, and
        // the handshake test below still catches a stuck first read (its bound is 3 s × scale).
        handshakeTimeout: .seconds(5 * testTimeScale),
        reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(100), maxDelay: .seconds(1), jitter: 0.1),
        authorization: .inline(try PusherInlineSigner(key: appKey, secret: appSecret, userID: "bridge"))
    )
}

private func quietLogger() -> Logger {
    var logger = Logger(label: "pusher-test")
    logger.logLevel = ProcessInfo.processInfo.environment["PUSHER_TEST_LOG"] == nil ? .critical : .debug
    return logger
}

/// The scripted server's side of "connect, subscribe, events, 4200, reconnect, resubscribe".
@Sendable private func reconnectScript(_ c: inout ScriptedConnection, log: ScriptLog) async throws {
    let socketID = "\(c.index + 1).\(c.index + 1)\(c.index + 1)"
    if !c.path.contains("protocol=7") { log.record("URL without protocol=7: \(c.path)") }
    try await c.sendEstablished(socketID: socketID)
    var subscribed: Set<String> = []
    while subscribed.count < 2 {
        guard let frame = try await c.receive() else {
            log.record("connection \(c.index) closed before subscribing")
            return
        }
        guard frame.event == "pusher:subscribe" else { continue }
        let fields = ScriptedConnection.fields(frame)
        let channel = fields["channel"] ?? ""
        if channel.hasPrefix("private-") {
            let ok = PusherAuth.verifyChannelAuth(
                fields["auth"] ?? "",
                key: appKey,
                secret: appSecret,
                socketID: socketID,
                channel: channel,
                channelData: nil
            )
            if !ok { log.record("connection \(c.index): bad auth for \(channel) on socket \(socketID)") }
        }
        subscribed.insert(channel)
        try await c.send(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: channel, data: "{}"))
    }
    try await c.send(PusherFrame(event: "tick", channel: "news", data: #"{"n":\#(c.index)}"#))
    try await c.send(PusherFrame(event: "secret", channel: "private-orders", data: "plain \(c.index)"))
    if c.index == 0 {
        try await c.close(code: 4200, reason: "generic reconnect")
    }
    // Also after our close: wait for the client's close reply, so the client reads our close
    // frame before the socket goes away (else its reply can meet a reset and the code is lost).
    while try await c.receive() != nil {}
}

@Suite(.timeLimit(.minutes(1))) struct ClientAgainstScriptedServerTests {
    @Test(arguments: [false, true])
    func subscribesReceivesAndResubscribesWithNewAuthAfter4200(useTLS: Bool) async throws {
        let certificates = useTLS ? try await TestCertificates.make() : nil
        defer { certificates?.remove() }
        let log = ScriptLog()
        try await withScriptedPusherServer(
            tls: try certificates?.serverTLS(),
            log: log,
            script: { connection in try await reconnectScript(&connection, log: log) }
        ) { port in
            let client = PusherClient(options: try options(port: port, tls: certificates), logger: quietLogger())
            let updates = client.updates()
            // Subscriptions asked for before the connection is up (libPusher allows this).
            let news = client.subscribe("news")
            client.subscribe("private-orders")
            let received = Locked<[String]>([])
            news.bind(eventName: "tick") { event in received.withLock { $0.append(event.data ?? "") } }
            try await withRunningClient(client) { client in
                client.connect()
                let seen = try await collect(updates, "two rounds of events") { seen in
                    seen.filter { if case .event = $0 { true } else { false } }.count == 4
                }
                let events = seen.compactMap { if case .event(let e) = $0 { e } else { nil } }
                #expect(events.map(\.name) == ["tick", "secret", "tick", "secret"])
                #expect(events[0] == PusherEvent(name: "tick", channel: "news", data: #"{"n":0}"#))
                #expect(events[2].data == #"{"n":1}"#)
                #expect(events[3] == PusherEvent(name: "secret", channel: "private-orders", data: "plain 1"))
                let states = seen.compactMap { if case .connectionStateChanged(let s) = $0 { s.current } else { nil } }
                // After the 4200 the client waits 0–500 ms (docs/contract.md §5.5), reported as reconnecting
                // unless the draw was zero.
                #expect(states.filter { $0 != .reconnecting } == [.connecting, .connected, .connecting, .connected])
                #expect(states.count <= 5)
                let successes = seen.filter { if case .subscriptionSucceeded = $0 { true } else { false } }
                #expect(successes.count == 4)
                #expect(client.socketID == "2.22")
                #expect(news.isSubscribed)
                #expect(received.withLock { $0 } == [#"{"n":0}"#, #"{"n":1}"#])
                client.disconnect()
                _ = try await collect(updates, "disconnected") { seen in
                    seen.contains(.connectionStateChanged(.init(previous: .disconnecting, current: .disconnected)))
                }
            }
        }
        #expect(log.recorded == [])
        #expect(log.connectionCount == 2)
    }

    @Test func pingsAfterInactivityAndReconnectsWhenNoPongComes() async throws {
        let log = ScriptLog()
        let pings = Locked(0)
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "\(c.index + 1).1", activityTimeout: 1)
            if c.index == 0 {
                // Answer the first ping, stay silent on the second: the client must give up.
                guard let ping = try await c.receive(), ping.event == "pusher:ping" else {
                    log.record("expected a pusher:ping")
                    return
                }
                pings.withLock { $0 += 1 }
                try await c.send(PusherFrame(event: "pusher:pong", data: "{}"))
                guard let second = try await c.receive(), second.event == "pusher:ping" else {
                    log.record("expected a second pusher:ping")
                    return
                }
                pings.withLock { $0 += 1 }
                while try await c.receive() != nil {}
            } else {
                // The server pings; the client must answer with pusher:pong.
                try await c.send(PusherFrame(event: "pusher:ping", data: "{}"))
                guard let pong = try await c.receive(), pong.event == "pusher:pong" else {
                    log.record("expected a pusher:pong answer")
                    return
                }
                try await c.send(PusherFrame(event: "done", data: "pong seen"))
                while try await c.receive() != nil {}
            }
        } test: { port in
            let client = PusherClient(
                options: try options(port: port, activity: .seconds(5), pong: .seconds(2 * testTimeScale)),
                logger: quietLogger()
            )
            let updates = client.updates()
            try await withRunningClient(client) { client in
                let started = ContinuousClock.now
                client.connect()
                let seen = try await collect(updates, seconds: 30, "pong answered on the second connection") { seen in
                    seen.contains(.event(PusherEvent(name: "done", channel: nil, data: "pong seen")))
                }
                let elapsed = ContinuousClock.now - started
                // 1 s activity (server's value wins) + 1 s to the 2nd ping + 2 s pong wait.
                // (The pong wait is 2 s, not 1, so parallel tests starving the reader on a
                // 2-core machine cannot fake a timeout.) The lower bound is the one that says the
                // timers ran; the upper one only catches a client that waited far too long: on a
                // starved machine (12 busy processes on 2 cores) this took 9.8 s, and the exact
                // durations are the state machine's tests, on a manual clock.
                #expect(elapsed >= .seconds(1.8 + 2 * testTimeScale))
                #expect(elapsed < .seconds(25 * testTimeScale))
                let states = seen.compactMap { if case .connectionStateChanged(let s) = $0 { s.current } else { nil } }
                #expect(states == [.connecting, .connected, .reconnecting, .connecting, .connected])
            }
        }
        #expect(pings.withLock { $0 } == 2)
        #expect(log.recorded == [])
    }

    @Test func refusedConnectionIsReportedAndNotRetriedWhenAskedNotTo() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.send(PusherFrame(event: "pusher:error", data: #"{"message":"App key test-key not in this cluster","code":4001}"#))
            try await c.close(code: 4001, reason: "app does not exist")
            while try await c.receive() != nil {}
        } test: { port in
            var opts = try options(port: port)
            opts.retryAfterRefusal = false
            let client = PusherClient(options: opts, logger: quietLogger())
            let errors = client.errors()
            let updates = client.updates()
            try await withRunningClient(client) { client in
                client.connect()
                let seen = try await collect(updates, "disconnected after refusal") { seen in
                    seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .disconnected } else { false } }
                }
                #expect(seen.contains(.error(.connectionRefused(closeCode: 4001, reason: "application does not exist"))))
                #expect(seen.contains(.error(.serverError(message: "App key test-key not in this cluster", code: 4001))))
                var iterator = errors.makeAsyncIterator()
                var first = await iterator.next()
                // Under parallel start-up load a first attempt can fail before the handshake
                // (seen as a transport error); skip those.
                while let error = first, error.pusherCode == nil { first = await iterator.next() }
                #expect(first?.pusherCode == 4001)
                let connectionsAtRefusal = log.connectionCount
                try await Task.sleep(for: .milliseconds(500))
                #expect(client.connectionState == .disconnected)
                // Not retried after the refusal.
                #expect(log.connectionCount == connectionsAtRefusal)
            }
        }
    }

    @Test func presenceMembersAndClientEventsOverTheWire() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "7.7")
            guard let subscribe = try await c.receive() else { return }
            let fields = ScriptedConnection.fields(subscribe)
            let channelData = fields["channel_data"] ?? ""
            if channelData != #"{"user_id":"bridge"}"# { log.record("unexpected channel_data \(channelData)") }
            let ok = PusherAuth.verifyChannelAuth(
                fields["auth"] ?? "",
                key: appKey,
                secret: appSecret,
                socketID: "7.7",
                channel: "presence-ops",
                channelData: channelData
            )
            if !ok { log.record("bad presence auth") }
            try await c.send(
                PusherFrame(
                    event: "pusher_internal:subscription_succeeded",
                    channel: "presence-ops",
                    data: #"{"presence":{"ids":["bridge",42],"hash":{"bridge":null,"42":{"name":"Ann"}},"count":2}}"#
                )
            )
            try await c.send(
                PusherFrame(event: "pusher_internal:member_added", channel: "presence-ops", data: #"{"user_id":"43","user_info":{}}"#))
            try await c.send(PusherFrame(event: "pusher_internal:member_removed", channel: "presence-ops", data: #"{"user_id":42}"#))
            guard let clientEvent = try await c.receive() else { return }
            if clientEvent != PusherFrame(event: "client-hello", channel: "presence-ops", data: #"{"x":1}"#) {
                log.record("unexpected client event \(clientEvent)")
            }
            // Garbage must not crash the client; it is counted.
            try await c.send("not json")
            try await c.send(#"{"event":"client-reply","channel":"presence-ops","data":"{}","user_id":43}"#)
            while try await c.receive() != nil {}
        } test: { port in
            let client = PusherClient(options: try options(port: port), logger: quietLogger())
            let presence = client.subscribeToPresenceChannel("presence-ops")
            let changes = presence.presenceChanges()
            let events = presence.events()
            try await withRunningClient(client) { client in
                client.connect()
                let seenChanges = try await withTimeout(15, "presence changes") {
                    var seen: [PusherPresenceChange] = []
                    for await change in changes {
                        seen.append(change)
                        if seen.count == 3 { break }
                    }
                    return seen
                }
                #expect(
                    seenChanges == [
                        .subscriptionSucceeded(
                            channel: "presence-ops",
                            members: [PusherMember(userID: "bridge"), PusherMember(userID: "42", userInfo: #"{"name":"Ann"}"#)],
                            me: PusherMember(userID: "bridge")
                        ),
                        .memberAdded(channel: "presence-ops", member: PusherMember(userID: "43", userInfo: "{}")),
                        .memberRemoved(channel: "presence-ops", member: PusherMember(userID: "42", userInfo: #"{"name":"Ann"}"#)),
                    ])
                #expect(presence.members.map(\.userID) == ["bridge", "43"])
                #expect(presence.me?.userID == "bridge")
                #expect(presence.findMember(userID: "43") != nil)
                try presence.channel.trigger(event: "client-hello", data: #"{"x":1}"#)
                let reply = try await withTimeout(15, "client event reply") {
                    for await event in events { return event }
                    throw TestFailure("stream ended")
                }
                #expect(reply == PusherEvent(name: "client-reply", channel: "presence-ops", data: "{}", userID: "43"))
                #expect(client.ignoredFrameCount == 1)
            }
        }
        #expect(log.recorded == [])
    }

    @Test func authEndpointFailureSurfacesOnTheChannel() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "1.2")
            while try await c.receive() != nil {}
        } test: { port in
            var opts = try options(port: port)
            opts.authorization = .authorizer { request in
                throw TestFailure("denied \(request.channelName) for \(request.socketID)")
            }
            let client = PusherClient(options: opts, logger: quietLogger())
            let errors = client.errors()
            client.subscribe("private-denied")
            try await withRunningClient(client) { client in
                client.connect()
                let error = try await withTimeout(15, "auth failure") {
                    for await error in errors { return error }
                    throw TestFailure("stream ended")
                }
                #expect(error.isSubscriptionFailure)
                #expect(error.channel == "private-denied")
                #expect(error.message.contains("denied private-denied for 1.2"))
            }
        }
    }
}

/// The auth endpoint mode over real HTTP: form body, custom headers, `shared_secret` for an
/// encrypted channel, and a refusal surfacing on its channel.
@Suite(.timeLimit(.minutes(1))) struct AuthEndpointTests {
    @Test(arguments: ["endpoint", "requestBuilder"])
    func endpointAuthorizesAndItsSharedSecretDecryptsEventsOverTheWire(mode: String) async throws {
        let log = ScriptLog()
        let channel = "private-encrypted-orders"
        let channelKey = PusherAuth.sharedSecret(channel: channel, masterKey: [UInt8](repeating: 9, count: 32))
        let formsSeen = Locked<[String: String]>([:])
        try await withScriptedPusherServer(log: log) { router in
            router.post("/pusher/auth") { request, _ -> Response in
                let body = String(buffer: try await request.body.collect(upTo: 4096))
                var form: [String: String] = [:]
                for pair in body.split(separator: "&") {
                    let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                    if parts.count == 2 { form[parts[0]] = parts[1] }
                }
                let channelName = form["channel_name"] ?? ""
                formsSeen.withLock { $0[channelName] = form["socket_id"] }
                guard request.headers[.authorization] == "Bearer t0k3n", channelName == channel else {
                    return Response(status: .forbidden, body: .init(byteBuffer: ByteBuffer(string: "forbidden")))
                }
                let auth = PusherAuth.channelAuth(key: appKey, secret: appSecret, socketID: form["socket_id"] ?? "", channel: channelName)
                let reply = #"{"auth":"\#(auth)","shared_secret":"\#(Data(channelKey).base64EncodedString())"}"#
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: reply)))
            }
        } script: { c in
            try await c.sendEstablished(socketID: "5.55")
            guard let subscribe = try await c.receive() else { return }
            let fields = ScriptedConnection.fields(subscribe)
            guard fields["channel"] == channel,
                PusherAuth.verifyChannelAuth(
                    fields["auth"] ?? "", key: appKey, secret: appSecret, socketID: "5.55", channel: channel, channelData: nil)
            else {
                log.record("unexpected subscribe \(subscribe)")
                return
            }
            try await c.send(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: channel, data: "{}"))
            let sealed = SecretBox.sealEventData(#"{"order":"A1","qty":2}"#, key: channelKey) ?? ""
            try await c.send(PusherFrame(event: "new-order", channel: channel, data: sealed))
            while try await c.receive() != nil {}
        } test: { port in
            var opts = try options(port: port)
            let url = "http://127.0.0.1:\(port)/pusher/auth"
            if mode == "endpoint" {
                opts.authorization = .endpoint(url: url, headers: ["Authorization": "Bearer t0k3n"])
            } else {
                opts.authorization = .requestBuilder { request in
                    var http = PusherAuthEndpointRequest(url: url, method: .POST)
                    http.headers.add(name: "Authorization", value: "Bearer t0k3n")
                    http.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                    http.body = request.formBody
                    return http
                }
            }
            // Our own HTTP client, shut down before the server stops: an idle keep-alive
            // connection of the shared client can hold up the server's graceful shutdown.
            let http = PusherHTTPConnectionPool(maximumConnectionsPerHost: 8)
            let client = PusherClient(options: opts, connectionPool: http, logger: quietLogger())
            let updates = client.updates()
            client.subscribe("private-forbidden")
            let orders = client.subscribe(channel)
            let events = orders.events()
            do {
                try await withRunningClient(client) { client in
                    client.connect()
                    let event = try await withTimeout(5, "decrypted event") {
                        for await event in events { return event }
                        throw TestFailure("stream ended")
                    }
                    #expect(event == PusherEvent(name: "new-order", channel: channel, data: #"{"order":"A1","qty":2}"#))
                    let seen = try await collect(updates, "forbidden channel failure") { seen in
                        seen.contains { if case .subscriptionFailed("private-forbidden", _) = $0 { true } else { false } }
                    }
                    let failure = seen.compactMap { if case .subscriptionFailed(_, let e) = $0 { e } else { nil } }.first
                    #expect(failure?.message.contains("403") == true)
                }
            } catch {
                await http.shutdown()
                throw error
            }
            await http.shutdown()
        }
        #expect(formsSeen.withLock { $0 } == [channel: "5.55", "private-forbidden": "5.55"])
        #expect(log.recorded == [])
    }
}

@Suite(.timeLimit(.minutes(1))) struct ClientLifecycleTests {
    /// disconnect() while the WebSocket is still being opened must close it once it opens,
    /// not leave a connection the machine no longer wants.
    @Test func disconnectWhileOpeningClosesTheNewConnection() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "1.1")
            while try await c.receive() != nil {}
        } test: { port in
            let client = PusherClient(options: try options(port: port), logger: quietLogger())
            let updates = client.updates()
            try await withRunningClient(client) { client in
                client.connect()
                client.disconnect()
                let seen = try await collect(updates, "disconnected") { seen in
                    seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .disconnected } else { false } }
                }
                #expect(!seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .connected } else { false } })
                try await Task.sleep(for: .milliseconds(200))
                #expect(client.connectionState == .disconnected)
                // And it can connect again afterwards.
                client.connect()
                _ = try await collect(updates, "connected again") { seen in
                    seen.contains { if case .connectionStateChanged(let s) = $0 { s.current == .connected } else { false } }
                }
                #expect(client.socketID == "1.1")
            }
        }
        #expect(log.recorded == [])
    }

    /// Unsubscribing at run time tells the server and stops delivery; subscribing again works.
    @Test func unsubscribeAndResubscribeAtRunTime() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "3.3")
            var expected = ["pusher:subscribe", "pusher:unsubscribe", "pusher:subscribe"]
            while let frame = try await c.receive() {
                guard !expected.isEmpty else { continue }
                let next = expected.removeFirst()
                if frame.event != next { log.record("expected \(next), got \(frame.event)") }
                if frame.event == "pusher:subscribe" {
                    try await c.send(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "news", data: "{}"))
                    try await c.send(PusherFrame(event: "hello", channel: "news", data: "\(expected.count)"))
                }
            }
        } test: { port in
            let client = PusherClient(options: try options(port: port), logger: quietLogger())
            let updates = client.updates()
            try await withRunningClient(client) { client in
                client.connect()
                client.subscribe("news")
                _ = try await collect(updates, "first hello") { seen in
                    seen.contains(.event(PusherEvent(name: "hello", channel: "news", data: "2")))
                }
                client.unsubscribe("news")
                #expect(client.channelNames.isEmpty)
                client.subscribe("news")
                _ = try await collect(updates, "second hello") { seen in
                    seen.contains(.event(PusherEvent(name: "hello", channel: "news", data: "0")))
                }
            }
        }
        #expect(log.recorded == [])
    }
}

@Suite(.timeLimit(.minutes(1))) struct ClientAsServiceTests {
    /// In a ServiceGroup, graceful shutdown disconnects with a close frame and run() returns.
    @Test func gracefulShutdownDisconnectsCleanly() async throws {
        let log = ScriptLog()
        let sawClose = Locked(false)
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "4.4")
            while try await c.receive() != nil {}
            sawClose.withLock { $0 = true }
        } test: { port in
            let client = PusherClient(options: try options(port: port), logger: quietLogger())
            let states = client.connectionStates()
            let group = ServiceGroup(services: [client], logger: quietLogger())
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                client.connect()
                _ = try await withTimeout(5, "connected") {
                    for await change in states where change.current == .connected { return true }
                    throw TestFailure("stream ended")
                }
                await group.triggerGracefulShutdown()
                // The group's run() must return: within 10 s, far past a clean close (well under a
                // second here; a starved machine took 3.8 s). That the close was clean is the
                // server's to say (below), not the clock's.
                let finished = Locked(false)
                tasks.addTask {
                    try await Task.sleep(for: .seconds(10))
                    if !finished.withLock({ $0 }) { throw TestFailure("service group did not finish after graceful shutdown") }
                }
                try await tasks.next()
                finished.withLock { $0 = true }
                tasks.cancelAll()
            }
            #expect(client.connectionState == .disconnected)
            // The server script sees the close frame a moment after the client is done.
            for _ in 0..<50 where !sawClose.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
            #expect(sawClose.withLock { $0 })
        }
        #expect(log.recorded == [])
    }
}

@Suite(.timeLimit(.minutes(1))) struct HandshakeLatencyTests {
    /// Servers send connection_established in the same instant as the upgrade response (so both
    /// may arrive in one TCP read). The client must see it at once, every time — not only when
    /// the next bytes arrive.
    @Test func establishedRightAfterTheUpgradeIsSeenPromptly() async throws {
        let log = ScriptLog()
        try await withScriptedPusherServer(log: log) { c in
            try await c.sendEstablished(socketID: "\(c.index + 1).1")
            while try await c.receive() != nil {}
        } test: { port in
            let client = PusherClient(options: try options(port: port), logger: quietLogger())
            let states = client.connectionStates()
            try await withRunningClient(client) { client in
                var slowest: Duration = .zero
                for _ in 0..<20 {
                    let started = ContinuousClock.now
                    client.connect()
                    _ = try await withTimeout(10, "connected") {
                        for await change in states where change.current == .connected { return true }
                        throw TestFailure("stream ended")
                    }
                    slowest = max(slowest, ContinuousClock.now - started)
                    await client.disconnectAndWait()
                }
                // A stuck first read waits for the 5 s handshake timeout, which closes the
                // connection and opens another: each try under that timeout, and exactly one
                // connection a try (below), show none was stuck. The timeout itself is the bound,
                // not a tighter one: parallel tests loading the 2 cores were seen to take 1.8 s.
                #expect(slowest < .seconds(5 * testTimeScale))
            }
        }
        #expect(log.connectionCount == 20)
    }
}
