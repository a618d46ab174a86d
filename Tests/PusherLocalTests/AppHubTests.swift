import PusherProtocol
import Testing

@testable import PusherLocal

/// Drives the pure hub with event sequences (no sockets, time passed in).
struct AppHubTests {
    let app = PusherLocalApp.demo
    let t0 = ContinuousClock.now
    let a = ConnectionID(1)
    let b = ConnectionID(2)
    let c = ConnectionID(3)

    func hub(_ ids: [ConnectionID] = []) -> AppHub {
        var hub = AppHub(app: app, activityTimeoutSeconds: 120)
        for id in ids { _ = hub.connected(id, socketID: "\(id.rawValue).\(id.rawValue)") }
        return hub
    }

    func socketID(_ id: ConnectionID) -> String { "\(id.rawValue).\(id.rawValue)" }

    func subscribeText(_ id: ConnectionID, _ channel: String, user: String? = nil, info: String = "{}", badAuth: Bool = false) -> String {
        var channelData: String?
        if let user { channelData = "{\"user_id\":\(user),\"user_info\":\(info)}" }
        let auth = PusherAuth.channelAuth(
            key: app.key,
            secret: badAuth ? "wrong" : app.secret,
            socketID: socketID(id),
            channel: channel,
            channelData: channelData
        )
        var data = "{\"channel\":\(jsonQuoted(channel)),\"auth\":\(jsonQuoted(auth))"
        if let channelData { data += ",\"channel_data\":" + jsonQuoted(channelData) }
        return "{\"event\":\"pusher:subscribe\",\"data\":\(data)}}"
    }

    /// Frames sent to `id` by `actions` (direct sends and deliveries).
    func frames(_ actions: [HubAction], to id: ConnectionID) -> [String] {
        actions.compactMap { action in
            switch action {
            case .send(let target, let text) where target == id: text
            case .deliver(let text, let targets) where targets.contains(id): text
            default: nil
            }
        }
    }

    func webhooks(_ actions: [HubAction]) -> [String] {
        actions.compactMap { if case .webhook(let event) = $0 { event.name } else { nil } }
    }

    @Test func connectionEstablishedCarriesSocketIDAndActivityTimeout() throws {
        var hub = AppHub(app: app, activityTimeoutSeconds: 7)
        let actions = hub.connected(a, socketID: "12.34")
        let frame = try #require(frames(actions, to: a).first)
        #expect(
            frame
                == "{\"event\":\"pusher:connection_established\",\"data\":\"{\\\"socket_id\\\":\\\"12.34\\\",\\\"activity_timeout\\\":7}\"}"
        )
    }

    @Test func pingIsAnsweredUnlessSwitchedOff() {
        var hub = hub([a])
        let ping = "{\"event\":\"pusher:ping\",\"data\":{}}"
        #expect(frames(hub.received(ping, from: a, now: t0), to: a) == [ServerFrame.pong])
        #expect(hub.received(ping, from: a, now: t0, answerPings: false).isEmpty)
    }

    @Test func publicSubscriptionSucceeds() {
        var hub = hub([a])
        let actions = hub.received(subscribeText(a, "news"), from: a, now: t0)
        #expect(frames(actions, to: a) == ["{\"event\":\"pusher_internal:subscription_succeeded\",\"channel\":\"news\",\"data\":\"{}\"}"])
        #expect(webhooks(actions) == ["channel_occupied"])
        #expect(hub.subscriptionCount("news") == 1)
    }

    @Test func privateSubscriptionChecksTheSignature() {
        var hub = hub([a])
        let bad = hub.received(subscribeText(a, "private-x", badAuth: true), from: a, now: t0)
        let error = frames(bad, to: a).first ?? ""
        #expect(error.contains("\"event\":\"pusher:error\""))
        #expect(error.contains("Invalid signature"))
        #expect(hub.subscriptionCount("private-x") == 0)
        #expect(hub.counters.refusedSubscriptions == 1)
        // Missing auth is refused too.
        let missing = hub.received("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"private-x\"}}", from: a, now: t0)
        #expect(frames(missing, to: a).first?.contains("needs an auth string") == true)
        let good = hub.received(subscribeText(a, "private-x"), from: a, now: t0)
        #expect(frames(good, to: a).first?.contains("subscription_succeeded") == true)
    }

    @Test func authForAnotherSocketIsRefused() {
        var hub = hub([a, b])
        // b presents a's signature.
        let text = subscribeText(a, "private-x")
        let actions = hub.received(text, from: b, now: t0)
        #expect(frames(actions, to: b).first?.contains("Invalid signature") == true)
    }

    @Test func encryptedChannelsNeedAuthLikePrivate() {
        var hub = hub([a])
        #expect(
            frames(hub.received(subscribeText(a, "private-encrypted-x", badAuth: true), from: a, now: t0), to: a).first?.contains(
                "pusher:error") == true)
        #expect(
            frames(hub.received(subscribeText(a, "private-encrypted-x"), from: a, now: t0), to: a).first?.contains("subscription_succeeded")
                == true)
    }

    @Test func doubleSubscriptionIsAnError() {
        var hub = hub([a])
        _ = hub.received(subscribeText(a, "news"), from: a, now: t0)
        let again = hub.received(subscribeText(a, "news"), from: a, now: t0)
        #expect(frames(again, to: a) == [ServerFrame.error("Existing subscription to channel news", code: nil)])
        #expect(hub.subscriptionCount("news") == 1)
    }

    @Test func invalidChannelNameIsRefused() {
        var hub = hub([a])
        let actions = hub.received("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"bad name\"}}", from: a, now: t0)
        #expect(frames(actions, to: a).first?.contains("Invalid channel name") == true)
    }

    @Test func presenceListsMembersAndAnnouncesOneAddedPerUser() throws {
        var hub = hub([a, b, c])
        let first = hub.received(subscribeText(a, "presence-room", user: "\"alice\"", info: "{\"name\":\"Alice\"}"), from: a, now: t0)
        let succeeded = try #require(frames(first, to: a).first)
        #expect(
            succeeded.contains(jsonQuoted("{\"presence\":{\"ids\":[\"alice\"],\"hash\":{\"alice\":{\"name\":\"Alice\"}},\"count\":1}}")))
        #expect(webhooks(first) == ["channel_occupied", "member_added"])

        let second = hub.received(subscribeText(b, "presence-room", user: "\"bob\""), from: b, now: t0)
        #expect(
            frames(second, to: a) == [
                ServerFrame.channelEvent(
                    event: "pusher_internal:member_added", channel: "presence-room", data: "{\"user_id\":\"bob\",\"user_info\":{}}")
            ])
        #expect(frames(second, to: b).count == 1)  // only its own subscription_succeeded

        // alice on a second connection: no second member_added, count stays 2.
        let third = hub.received(subscribeText(c, "presence-room", user: "\"alice\"", info: "{\"name\":\"Alice\"}"), from: c, now: t0)
        #expect(frames(third, to: a).isEmpty)
        #expect(frames(third, to: b).isEmpty)
        #expect(hub.userCount("presence-room") == 2)
        #expect(hub.users("presence-room") == ["alice", "bob"])

        // alice leaves one connection: nothing; leaves the last: member_removed to bob.
        #expect(frames(hub.disconnected(a), to: b).isEmpty)
        let gone = hub.disconnected(c)
        #expect(
            frames(gone, to: b) == [
                ServerFrame.channelEvent(event: "pusher_internal:member_removed", channel: "presence-room", data: "{\"user_id\":\"alice\"}")
            ])
        #expect(webhooks(gone) == ["member_removed"])
        #expect(hub.users("presence-room") == ["bob"])
    }

    @Test func numericUserIDIsNormalisedToAString() {
        var hub = hub([a])
        let actions = hub.received(subscribeText(a, "presence-n", user: "42"), from: a, now: t0)
        #expect(frames(actions, to: a).first?.contains("ids\\\":[\\\"42\\\"]") == true)
        #expect(hub.users("presence-n") == ["42"])
    }

    @Test func presenceChannelDataIsValidated() {
        var hub = hub([a])
        let longID = "\"" + String(repeating: "u", count: 129) + "\""
        #expect(
            frames(hub.received(subscribeText(a, "presence-v", user: longID), from: a, now: t0), to: a).first?.contains("longer than 128")
                == true)
        let bigInfo = "{\"x\":\"" + String(repeating: "i", count: 1001) + "\"}"
        #expect(
            frames(hub.received(subscribeText(a, "presence-v", user: "\"u\"", info: bigInfo), from: a, now: t0), to: a).first?.contains(
                "larger than 1000") == true)
        #expect(hub.subscriptionCount("presence-v") == 0)
    }

    @Test func presenceChannelIsLimitedTo100Members() {
        var hub = AppHub(app: app, activityTimeoutSeconds: 120)
        for n in 1...101 {
            let id = ConnectionID(UInt64(n))
            _ = hub.connected(id, socketID: socketID(id))
            _ = hub.received(subscribeText(id, "presence-full", user: "\"user\(n)\""), from: id, now: t0)
        }
        #expect(hub.userCount("presence-full") == 100)
        #expect(hub.counters.refusedSubscriptions == 1)
    }

    @Test func unsubscribeVacatesTheChannel() {
        var hub = hub([a])
        _ = hub.received(subscribeText(a, "news"), from: a, now: t0)
        let actions = hub.received("{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"news\"}}", from: a, now: t0)
        #expect(webhooks(actions) == ["channel_vacated"])
        #expect(hub.subscriptionCount("news") == 0)
        #expect(hub.occupiedChannels(prefix: nil).isEmpty)
    }

    // MARK: client events

    func clientEventText(_ channel: String, _ event: String = "client-typing", data: String = "{\"x\":1}") -> String {
        "{\"event\":\(jsonQuoted(event)),\"channel\":\(jsonQuoted(channel)),\"data\":\(data)}"
    }

    @Test func clientEventsReachOthersButNotTheSender() {
        var hub = hub([a, b])
        _ = hub.received(subscribeText(a, "private-chat"), from: a, now: t0)
        _ = hub.received(subscribeText(b, "private-chat"), from: b, now: t0)
        let actions = hub.received(clientEventText("private-chat", data: "{\"x\":true,\"a\":[1,2.5]}"), from: a, now: t0)
        #expect(
            frames(actions, to: b) == [
                ServerFrame.channelEvent(event: "client-typing", channel: "private-chat", data: "{\"x\":true,\"a\":[1,2.5]}")
            ])
        #expect(frames(actions, to: a).isEmpty)
        #expect(webhooks(actions) == ["client_event"])
    }

    @Test func clientEventsOnPresenceCarryTheUserID() {
        var hub = hub([a, b])
        _ = hub.received(subscribeText(a, "presence-chat", user: "\"alice\""), from: a, now: t0)
        _ = hub.received(subscribeText(b, "presence-chat", user: "\"bob\""), from: b, now: t0)
        let actions = hub.received(clientEventText("presence-chat", data: "\"hi\""), from: a, now: t0)
        #expect(
            frames(actions, to: b) == [
                ServerFrame.channelEvent(event: "client-typing", channel: "presence-chat", data: "hi", userID: "alice")
            ])
    }

    @Test func clientEventsAreRefusedOnPublicAndEncryptedChannels() {
        var hub = hub([a, b])
        for channel in ["news", "private-encrypted-x"] {
            _ = hub.received(subscribeText(a, channel), from: a, now: t0)
            _ = hub.received(subscribeText(b, channel), from: b, now: t0)
            let actions = hub.received(clientEventText(channel), from: a, now: t0)
            #expect(frames(actions, to: b).isEmpty)
            #expect(frames(actions, to: a).first?.contains("only supported on private and presence") == true)
        }
    }

    @Test func clientEventsNeedASubscription() {
        var hub = hub([a, b])
        _ = hub.received(subscribeText(b, "private-chat"), from: b, now: t0)
        let actions = hub.received(clientEventText("private-chat"), from: a, now: t0)
        #expect(frames(actions, to: b).isEmpty)
        #expect(frames(actions, to: a).first?.contains("not subscribed") == true)
    }

    @Test func clientEventsAreRateLimitedToTenPerSecond() {
        var hub = hub([a, b])
        _ = hub.received(subscribeText(a, "private-chat"), from: a, now: t0)
        _ = hub.received(subscribeText(b, "private-chat"), from: b, now: t0)
        for i in 0..<10 {
            let actions = hub.received(clientEventText("private-chat"), from: a, now: t0 + .milliseconds(i * 50))
            #expect(frames(actions, to: b).count == 1)
        }
        let eleventh = hub.received(clientEventText("private-chat"), from: a, now: t0 + .milliseconds(900))
        #expect(frames(eleventh, to: b).isEmpty)
        #expect(frames(eleventh, to: a) == [ServerFrame.error("Client event rejected due to rate limit", code: 4301)])
        // A new one-second window accepts again.
        let later = hub.received(clientEventText("private-chat"), from: a, now: t0 + .milliseconds(1001))
        #expect(frames(later, to: b).count == 1)
    }

    @Test func clientEventDataIsLimited() {
        var hub = hub([a, b])
        _ = hub.received(subscribeText(a, "private-chat"), from: a, now: t0)
        _ = hub.received(subscribeText(b, "private-chat"), from: b, now: t0)
        let big = jsonQuoted(String(repeating: "d", count: 10 * 1024 + 1))
        let actions = hub.received(clientEventText("private-chat", data: big), from: a, now: t0)
        #expect(frames(actions, to: b).isEmpty)
        #expect(frames(actions, to: a).first?.contains("larger than") == true)
    }

    // MARK: bad frames

    @Test func badFramesGetAnErrorAndAreCounted() {
        var hub = hub([a])
        for text in [
            "not json", "{\"data\":{}}", "[1,2]", "{\"event\":\"pusher:subscribe\",\"data\":5}", "{\"event\":\"hello\"}",
            "{\"event\":\"pusher:nonsense\"}",
        ] {
            let actions = hub.received(text, from: a, now: t0)
            #expect(frames(actions, to: a).first?.contains("pusher:error") == true, "\(text)")
        }
        #expect(hub.counters.badFrames == 6)
    }

    @Test func subscribeDataAsAStringIsAccepted() {
        var hub = hub([a])
        let actions = hub.received("{\"event\":\"pusher:subscribe\",\"data\":\"{\\\"channel\\\":\\\"news\\\"}\"}", from: a, now: t0)
        #expect(frames(actions, to: a).first?.contains("subscription_succeeded") == true)
    }

    // MARK: HTTP publishing

    @Test func publishDeliversOneFrameToEverySubscriberExceptTheExcludedSocket() {
        var hub = hub([a, b, c])
        for id in [a, b] { _ = hub.received(subscribeText(id, "news"), from: id, now: t0) }
        let actions = hub.publish(
            PublishRequest(name: "update", data: "{\"v\":1}", channels: ["news", "empty"], socketID: socketID(a)), now: t0)
        #expect(actions == [.deliver(ServerFrame.channelEvent(event: "update", channel: "news", data: "{\"v\":1}"), to: [b])])
        #expect(hub.counters.eventsPublished == 2)
        #expect(hub.counters.framesDelivered == 1)
    }

    @Test func publishValidationFollowsPusherLimits() {
        func check(_ request: PublishRequest) -> Int? { AppHub.validate(request)?.status }
        #expect(check(PublishRequest(name: "e", data: "d", channels: ["c"])) == nil)
        #expect(check(PublishRequest(name: "e", data: "d", channels: (0...100).map { "c\($0)" })) == 400)
        #expect(check(PublishRequest(name: "e", data: "d", channels: (0..<100).map { "c\($0)" })) == nil)
        #expect(check(PublishRequest(name: "e", data: String(repeating: "x", count: 10 * 1024 + 1), channels: ["c"])) == 413)
        #expect(check(PublishRequest(name: "e", data: String(repeating: "x", count: 10 * 1024), channels: ["c"])) == nil)
        #expect(check(PublishRequest(name: "pusher:x", data: "d", channels: ["c"])) == 400)
        #expect(check(PublishRequest(name: String(repeating: "n", count: 201), data: "d", channels: ["c"])) == 400)
        #expect(check(PublishRequest(name: "e", data: "d", channels: ["bad/name"])) == 400)
        #expect(check(PublishRequest(name: "e", data: "d", channels: [String(repeating: "c", count: 165)])) == 400)
        #expect(check(PublishRequest(name: "e", data: "d", channels: [])) == 400)
        #expect(check(PublishRequest(name: "e", data: "d", channels: ["c"], socketID: "abc")) == 400)
    }

    // MARK: cache channels

    @Test func cacheChannelsReplayTheLastEventOrSayCacheMiss() {
        var hub = hub([a, b, c])
        let miss = hub.received(subscribeText(a, "cache-prices"), from: a, now: t0)
        #expect(frames(miss, to: a).last == ServerFrame.cacheMiss(channel: "cache-prices"))
        #expect(webhooks(miss).contains("cache_miss"))
        _ = hub.publish(PublishRequest(name: "p", data: "1", channels: ["cache-prices"]), now: t0)
        _ = hub.publish(PublishRequest(name: "p", data: "2", channels: ["cache-prices"]), now: t0)
        let hit = hub.received(subscribeText(b, "cache-prices"), from: b, now: t0 + .seconds(60))
        #expect(frames(hit, to: b).last == ServerFrame.channelEvent(event: "p", channel: "cache-prices", data: "2"))
        // After 30 minutes the cached event has expired.
        let expired = hub.received(subscribeText(c, "cache-prices"), from: c, now: t0 + .seconds(30 * 60 + 1))
        #expect(frames(expired, to: c).last == ServerFrame.cacheMiss(channel: "cache-prices"))
    }

    @Test func encryptedPayloadsPassThroughUntouched() {
        var hub = hub([a])
        _ = hub.received(subscribeText(a, "private-encrypted-vault"), from: a, now: t0)
        let sealed = "{\"nonce\":\"bm9uY2U=\",\"ciphertext\":\"Y2lwaGVy\"}"
        let actions = hub.publish(PublishRequest(name: "secret", data: sealed, channels: ["private-encrypted-vault"]), now: t0)
        #expect(frames(actions, to: a) == [ServerFrame.channelEvent(event: "secret", channel: "private-encrypted-vault", data: sealed)])
    }

    @Test func signinChecksTheUserSignature() throws {
        var hub = hub([a])
        let userData = "{\"id\":\"u7\",\"user_info\":{\"n\":1}}"
        func frame(_ auth: String) -> String {
            "{\"event\":\"pusher:signin\",\"data\":{\"auth\":\(jsonQuoted(auth)),\"user_data\":\(jsonQuoted(userData))}}"
        }
        let good = PusherAuth.userAuth(key: app.key, secret: app.secret, socketID: socketID(a), userData: userData)
        let reply = try #require(frames(hub.received(frame(good), from: a, now: t0), to: a).first)
        #expect(
            reply == "{\"event\":\"pusher:signin_success\",\"data\":" + jsonQuoted("{\"user_data\":" + jsonQuoted(userData) + "}") + "}")
        let bad = PusherAuth.userAuth(key: app.key, secret: "wrong", socketID: socketID(a), userData: userData)
        #expect(frames(hub.received(frame(bad), from: a, now: t0), to: a).first?.contains("Invalid signature") == true)
    }

    @Test func closeAllClosesEveryConnectionWithTheCode() {
        let hub = hub([a, b])
        #expect(hub.closeAll(code: 4200, reason: "r") == [.close(a, code: 4200, reason: "r"), .close(b, code: 4200, reason: "r")])
    }

    @Test func closeBySocketIDClosesOnlyThatConnection() {
        var hub = hub([a, b])
        #expect(hub.close(socketID: "2.2", code: 4200, reason: "r") == [.close(b, code: 4200, reason: "r")])
        // An unknown socket id, and one whose connection has ended, close nothing.
        #expect(hub.close(socketID: "9.9", code: 4200, reason: "r") == nil)
        _ = hub.disconnected(b)
        #expect(hub.close(socketID: "2.2", code: 4200, reason: "r") == nil)
        #expect(hub.close(socketID: "1.1", code: 4100, reason: "q") == [.close(a, code: 4100, reason: "q")])
    }
}

/// Hostile and mangled frames: the hub answers or ignores them, never traps.
struct AppHubRobustnessTests {
    /// A small deterministic generator (SplitMix64), so a failure can be replayed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds = [
        "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"presence-x\",\"auth\":\"app-key:00\",\"channel_data\":\"{\\\"user_id\\\":1}\"}}",
        "{\"event\":\"client-x\",\"channel\":\"private-x\",\"data\":{\"a\":[1,2,{\"b\":null}]}}",
        "{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"x\"}}",
        "{\"event\":\"pusher:ping\",\"data\":\"\"}",
        "{\"event\":\"pusher:subscribe\",\"data\":\"{\\\"channel\\\":\\\"cache-x\\\"}\"}",
    ]

    @Test func mutatedFramesNeverTrap() {
        var random = SplitMix(state: 42)
        var hub = AppHub(app: .demo, activityTimeoutSeconds: 120)
        let id = ConnectionID(1)
        _ = hub.connected(id, socketID: "1.1")
        let alphabet = Array("{}[]\":,\\ uxnulltrue-0123456789.eE".utf8) + [0x00, 0xFF, 0xC3]
        var answered = 0
        for round in 0..<3000 {
            var bytes = Array(Self.seeds[round % Self.seeds.count].utf8)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                guard !bytes.isEmpty else { break }
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[at] = alphabet.randomElement(using: &random) ?? 0
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet.randomElement(using: &random) ?? 0, at: at)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            answered += hub.received(text, from: id, now: .now).count
        }
        #expect(answered > 0)
        #expect(hub.connectionCount == 1)
    }

    @Test func deeplyNestedFrameIsRefused() {
        var hub = AppHub(app: .demo, activityTimeoutSeconds: 120)
        let id = ConnectionID(1)
        _ = hub.connected(id, socketID: "1.1")
        let deep = "{\"event\":\"client-x\",\"channel\":\"private-x\",\"data\":" + String(repeating: "[", count: 100_000) + "}"
        let actions = hub.received(deep, from: id, now: .now)
        #expect(actions.count == 1)
        #expect(hub.counters.badFrames == 1)
    }
}
