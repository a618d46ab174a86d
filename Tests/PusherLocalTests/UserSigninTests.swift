import PusherProtocol
import Testing

@testable import PusherLocal

/// A hub for the user-level tests: connections `1.1`, `2.2`, … and frames to sign in with.
struct UserHub {
    var hub: AppHub
    let t0 = ContinuousClock.now
    var app: PusherLocalApp { hub.app }

    init(_ ids: [ConnectionID], watchlistEvents: Bool = false, signinTimeout: Duration? = nil) {
        hub = AppHub(app: .demo, activityTimeoutSeconds: 120)
        hub.watchlistEvents = watchlistEvents
        hub.signinTimeout = signinTimeout
        for id in ids { _ = hub.connected(id, socketID: Self.socketID(id)) }
    }

    static func socketID(_ id: ConnectionID) -> String { "\(id.rawValue).\(id.rawValue)" }

    /// `{"id":USER[,"watchlist":[…]]}`.
    static func userData(_ user: String, watchlist: [String]? = nil) -> String {
        var text = "{\"id\":" + jsonQuoted(user) + ",\"user_info\":{\"name\":\"N\"}"
        if let watchlist { text += ",\"watchlist\":[" + watchlist.map(jsonQuoted).joined(separator: ",") + "]" }
        return text + "}"
    }

    /// A `pusher:signin` frame for `id`, signed with `secret` (the app's unless given).
    func signinFrame(_ id: ConnectionID, userData: String, secret: String? = nil) -> String {
        let auth = PusherAuth.userAuth(key: app.key, secret: secret ?? app.secret, socketID: Self.socketID(id), userData: userData)
        return "{\"event\":\"pusher:signin\",\"data\":{\"auth\":\(jsonQuoted(auth)),\"user_data\":\(jsonQuoted(userData))}}"
    }

    mutating func signin(_ id: ConnectionID, _ user: String, watchlist: [String]? = nil) -> [HubAction] {
        hub.received(signinFrame(id, userData: Self.userData(user, watchlist: watchlist)), from: id, now: t0)
    }

    mutating func send(_ id: ConnectionID, _ text: String) -> [HubAction] { hub.received(text, from: id, now: t0) }

    mutating func subscribe(_ id: ConnectionID, _ channel: String) -> [HubAction] {
        send(id, "{\"event\":\"pusher:subscribe\",\"data\":{\"auth\":\"\",\"channel\":\(jsonQuoted(channel))}}")
    }
}

/// Frames sent to `id` by `actions` (direct sends and deliveries).
func framesTo(_ id: ConnectionID, _ actions: [HubAction]) -> [String] {
    actions.compactMap { action in
        switch action {
        case .send(let target, let text) where target == id: text
        case .deliver(let text, let targets) where targets.contains(id): text
        default: nil
        }
    }
}

/// The `pusher_internal:watchlist_events` frame with one event.
func watchlistFrame(_ name: String, _ ids: [String]) -> String {
    ServerFrame.watchlistEvents(name: name, userIDs: ids)
}

/// `pusher:signin`, `#server-to-user-<id>` and the sign-in timeout (docs/pusher-protocol.md §1,
/// "User sign-in"), on the pure hub.
struct UserSigninTests {
    let a = ConnectionID(1)
    let b = ConnectionID(2)
    let c = ConnectionID(3)

    @Test func signinSucceedsWithTheSameUserDataAndIsCounted() throws {
        var users = UserHub([a])
        let userData = UserHub.userData("u7")
        let actions = users.send(a, users.signinFrame(a, userData: userData))
        #expect(
            framesTo(a, actions) == [
                "{\"event\":\"pusher:signin_success\",\"data\":" + jsonQuoted("{\"user_data\":" + jsonQuoted(userData) + "}") + "}"
            ])
        #expect(users.hub.counters.signins == 1)
        #expect(users.hub.onlineUserCount == 1)
        #expect(users.hub.connectionRecords.first?.signedInAs == "u7")
    }

    @Test func serverToUserChannelDeliversToEverySignedInConnectionOfThatUser() {
        var users = UserHub([a, b, c])
        _ = users.signin(a, "u1")
        _ = users.signin(b, "u1")
        _ = users.signin(c, "u2")
        for id in [a, b] {
            #expect(
                framesTo(id, users.subscribe(id, "#server-to-user-u1")) == [
                    "{\"event\":\"pusher_internal:subscription_succeeded\",\"channel\":\"#server-to-user-u1\",\"data\":\"{}\"}"
                ])
        }
        _ = users.subscribe(c, "#server-to-user-u2")
        let request = PublishRequest(name: "note", data: "{\"n\":1}", channels: ["#server-to-user-u1"])
        #expect(AppHub.validate(request) == nil)
        let actions = users.hub.publish(request, now: users.t0)
        let frame = ServerFrame.channelEvent(event: "note", channel: "#server-to-user-u1", data: "{\"n\":1}")
        #expect(framesTo(a, actions) == [frame])
        #expect(framesTo(b, actions) == [frame])
        #expect(framesTo(c, actions).isEmpty)
        // The user's channel is not a channel of the app: no webhooks, not listed.
        #expect(users.hub.occupiedChannels(prefix: nil) == [])
        #expect(users.hub.disconnected(a).allSatisfy { if case .webhook = $0 { false } else { true } })
        #expect(users.hub.disconnected(b).allSatisfy { if case .webhook = $0 { false } else { true } })
    }

    @Test func serverToUserChannelIsRefusedToOthersAndBeforeSignin() {
        var users = UserHub([a, b])
        let before = users.subscribe(a, "#server-to-user-u1")
        #expect(framesTo(a, before).first?.contains("pusher:signin first") == true)
        _ = users.signin(a, "u1")
        _ = users.signin(b, "u2")
        let other = users.subscribe(b, "#server-to-user-u1")
        #expect(framesTo(b, other).first?.contains("\"event\":\"pusher:error\"") == true)
        #expect(framesTo(b, other).first?.contains("signed in as u2") == true)
        #expect(users.hub.subscriptionCount("#server-to-user-u1") == 0)
        _ = users.subscribe(a, "#server-to-user-u1")
        let twice = users.subscribe(a, "#server-to-user-u1")
        #expect(framesTo(a, twice).first?.contains("Existing subscription") == true)
        #expect(users.hub.counters.refusedSubscriptions == 3)
        // Other '#' names stay invalid channel names.
        #expect(framesTo(a, users.subscribe(a, "#other-u1")).first?.contains("Invalid channel name") == true)
    }

    @Test func httpValidationAcceptsOnlyValidUserIDsAfterTheServerToUserPrefix() {
        #expect(
            AppHub.validate(PublishRequest(name: "e", data: "{}", channels: ["#server-to-user-" + String(repeating: "x", count: 200)]))
                == nil)
        #expect(
            AppHub.validate(PublishRequest(name: "e", data: "{}", channels: ["#server-to-user-" + String(repeating: "x", count: 201)]))
                != nil)
        #expect(AppHub.validate(PublishRequest(name: "e", data: "{}", channels: ["#server-to-user-"])) != nil)
        #expect(AppHub.validate(PublishRequest(name: "e", data: "{}", channels: ["#server-to-user-a b"])) != nil)
        #expect(AppHub.validate(PublishRequest(name: "e", data: "{}", channels: ["#server-to-users"])) != nil)
    }

    @Test func terminateClosesOnlyThatUsersSignedInConnectionsWith4009() {
        let d = ConnectionID(4)
        var users = UserHub([a, b, c, d])
        _ = users.signin(a, "u1")
        _ = users.signin(b, "u1")
        _ = users.signin(c, "u2")
        let actions = users.hub.terminateUserConnections("u1")
        #expect(
            actions == [
                .close(a, code: 4009, reason: "User connections terminated"), .close(b, code: 4009, reason: "User connections terminated"),
            ])
        #expect(users.hub.counters.connectionsTerminated == 2)
        #expect(users.hub.terminateUserConnections("nobody").isEmpty)
    }

    @Test func signinTimeoutClosesOnlyConnectionsThatDidNotSignIn() {
        var users = UserHub([a, b], signinTimeout: .seconds(30))
        _ = users.signin(a, "u1")
        #expect(users.hub.signinDeadlineReached(a).isEmpty)
        #expect(users.hub.signinDeadlineReached(b) == [.close(b, code: 4009, reason: "Not signed in within the sign-in timeout")])
        #expect(users.hub.signinDeadlineReached(ConnectionID(99)).isEmpty)
        _ = users.hub.disconnected(b)
        #expect(users.hub.signinDeadlineReached(b).isEmpty)
        #expect(users.hub.counters.signinTimeouts == 1)
    }

    @Test func signingInAgainAsTheSameUserIsAcceptedAndAsAnotherIsRefused() {
        var users = UserHub([a])
        _ = users.signin(a, "u1")
        #expect(framesTo(a, users.signin(a, "u1")).first?.contains("pusher:signin_success") == true)
        let other = users.signin(a, "u2")
        #expect(framesTo(a, other).first?.contains("signed in as u1; it cannot sign in as u2") == true)
        #expect(users.hub.counters.signins == 2)
        #expect(users.hub.counters.refusedSignins == 1)
        #expect(users.hub.signedInConnectionCount("u1") == 1)
        #expect(users.hub.signedInConnectionCount("u2") == 0)
    }

    /// Every bad `pusher:signin`: a `pusher:error` (code null) saying why, counted, nothing kept.
    @Test(arguments: [
        ("not JSON", "{nope", "user_data must be a JSON object"),
        ("an array", "[1]", "user_data must be a JSON object"),
        ("no id", "{\"user_info\":{}}", "string 'id'"),
        ("number id", "{\"id\":7}", "string 'id'"),
        ("empty id", "{\"id\":\"\"}", "user id is empty"),
        ("bad character", "{\"id\":\"a b\"}", "user id contains ' '"),
        ("hash", "{\"id\":\"#x\"}", "user id contains '#'"),
        ("non-ASCII", "{\"id\":\"\u{e9}\"}", "non-ASCII"),
        ("id over 200", "{\"id\":\"" + String(repeating: "i", count: 201) + "\"}", "longer than 200"),
        ("watchlist not array", "{\"id\":\"u\",\"watchlist\":\"v\"}", "watchlist must be an array"),
        ("watchlist numbers", "{\"id\":\"u\",\"watchlist\":[1]}", "watchlist must be an array"),
        ("watchlist bad id", "{\"id\":\"u\",\"watchlist\":[\"a b\"]}", "watchlist holds an invalid id"),
        ("over 10 KB", "{\"id\":\"u\",\"user_info\":\"" + String(repeating: "x", count: 10 * 1024) + "\"}", "at most 10240"),
    ])
    func badUserDataIsRefused(_ what: String, _ userData: String, _ message: String) throws {
        var users = UserHub([a])
        let actions = users.send(a, users.signinFrame(a, userData: userData))
        let frame = try #require(framesTo(a, actions).first, "\(what)")
        #expect(frame.hasPrefix("{\"event\":\"pusher:error\""), "\(what)")
        #expect(frame.contains(message), "\(what): \(frame)")
        #expect(users.hub.counters.refusedSignins == 1, "\(what)")
        #expect(users.hub.counters.signins == 0, "\(what)")
        #expect(users.hub.onlineUserCount == 0, "\(what)")
    }

    @Test func forgedAndMalformedSigninsAreRefused() {
        var users = UserHub([a, b])
        let userData = UserHub.userData("u1")
        let forged = users.send(a, users.signinFrame(a, userData: userData, secret: "wrong"))
        #expect(framesTo(a, forged).first?.contains("Invalid signature for pusher:signin") == true)
        // Signed for another connection's socket id: as forged.
        let replayed = users.send(b, users.signinFrame(a, userData: userData))
        #expect(framesTo(b, replayed).first?.contains("Invalid signature") == true)
        let noAuth = users.send(a, "{\"event\":\"pusher:signin\",\"data\":{\"user_data\":\"{}\"}}")
        #expect(framesTo(a, noAuth).first?.contains("needs data.auth and data.user_data") == true)
        let noObject = users.send(a, "{\"event\":\"pusher:signin\",\"data\":7}")
        #expect(framesTo(a, noObject).first?.contains("needs a data object") == true)
        #expect(users.hub.counters.refusedSignins == 4)
        #expect(users.hub.counters.badFrames == 1)
        #expect(users.hub.onlineUserCount == 0)
        // The connection can still sign in properly.
        #expect(framesTo(a, users.signin(a, "u1")).first?.contains("pusher:signin_success") == true)
    }
}

/// Pusher's documented sign-in example (Tests/Fixtures/pusher-signatures.json, "user_auth"),
/// accepted by the hub as it stands.
struct UserSigninVectorTests {
    @Test func theDocumentedExampleSignsIn() throws {
        let app = PusherLocalApp(id: "1", key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8")
        var hub = AppHub(app: app, activityTimeoutSeconds: 120)
        let a = ConnectionID(1)
        _ = hub.connected(a, socketID: "1234.1234")
        let auth = "278d425bdf160c739803:4708d583dada6a56435fb8bc611c77c359a31eebde13337c16ab43aa6de336ba"
        let frame =
            "{\"event\":\"pusher:signin\",\"data\":{\"auth\":\(jsonQuoted(auth)),\"user_data\":\(jsonQuoted("{\"id\":\"12345\"}"))}}"
        let reply = try #require(framesTo(a, hub.received(frame, from: a, now: .now)).first)
        #expect(reply.contains("pusher:signin_success"))
        #expect(hub.signedInConnectionCount("12345") == 1)
    }
}
