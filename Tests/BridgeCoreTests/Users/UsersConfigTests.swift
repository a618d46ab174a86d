import Testing

@testable import BridgeCore

/// `sign_in`, `user_auth_endpoint`, `watchlist`, `[bridge.users]`, and rules with `to_user` or
/// `terminate_user` (docs/contract.md §8.2): what `check` (and `run`) accepts and refuses, with
/// positions.
@Suite struct UsersConfigTests {
    static let users = """
        [bridge.users]
        topic = "dash/users"
        """

    @Test func signInWithTheSecretAndAWatchlist() throws {
        let config = try Fixture.parse(
            Fixture.config(
                pusher: #"sign_in = true; watchlist = ["d1", "d2"]"#.replacingOccurrences(of: "; ", with: "\n"), extra: Self.users))
        let bridge = config.bridges[0]
        #expect(bridge.pusher.signIn)
        #expect(bridge.pusher.watchlist == ["d1", "d2"])
        #expect(bridge.pusher.userID == "pusher-mqtt-bridge-factory")
        #expect(bridge.users == UsersSettings(topic: "dash/users"))
    }

    @Test func signInIsOffByDefault() throws {
        let bridge = try Fixture.parse(Fixture.config()).bridges[0]
        #expect(!bridge.pusher.signIn && bridge.pusher.watchlist.isEmpty && bridge.users == nil)
    }

    @Test func aUserAuthEndpointNeedsNoSecret() throws {
        let text = """
            [[bridge]]
            name = "factory"
            [bridge.pusher]
            key = "app-key"
            host = "127.0.0.1"
            tls = false
            sign_in = true
            user_auth_endpoint = "http://127.0.0.1:9/user-auth"
            auth_headers = { Authorization = "Bearer x" }
            [bridge.mqtt]
            host = "127.0.0.1"
            """
        let pusher = try Fixture.parse(text).bridges[0].pusher
        #expect(pusher.userAuthEndpoint == "http://127.0.0.1:9/user-auth")
        #expect(pusher.authHeaders == ["Authorization": "Bearer x"])
    }

    /// Fixture.config puts the `pusher` text on line 11.
    @Test(arguments: [
        ("watchlist = [\"d1\"]", "watchlist: needs sign_in = true: the watchlist travels in the bridge's sign-in"),
        ("user_auth_endpoint = \"http://x/a\"", "user_auth_endpoint: only applies with sign_in = true"),
        ("sign_in = \"yes\"", "sign_in: expected true or false, found a string"),
        ("sign_in = true\nuser_auth_endpoint = \"ftp://x\"", "user_auth_endpoint: expected an http:// or https:// URL, found \"ftp://x\""),
        ("sign_in = true\nwatchlist = [\"a b\"]", "watchlist: \"a b\": user id contains ' '; allowed are A-Z a-z 0-9 _ - = @ , . ;"),
        ("sign_in = true\nwatchlist = [\"d1\", \"d1\"]", "watchlist: \"d1\" is listed twice"),
        ("sign_in = true\nwatchlist = [1]", "watchlist: element 1 must be a string, found an integer"),
        (
            "sign_in = true\nuser_id = \"has space\"",
            "user_id: is the id the bridge signs in as: user id contains ' '; allowed are A-Z a-z 0-9 _ - = @ , . ;"
        ),
        ("sign_in = true\nwatchlists = []", "watchlists: unknown key 'watchlists' (did you mean 'watchlist'?)"),
    ])
    func badSignInKeysAreReportedAtTheirKey(_ line: String, _ message: String) {
        let errors = Fixture.errors(Fixture.config(pusher: line))
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.hasSuffix("bridge.factory.pusher.\(message)") == true, "\(errors)")
    }

    @Test func aWatchlistOf101IsRefused() {
        let ids = (1...101).map { "\"d\($0)\"" }.joined(separator: ", ")
        #expect(
            Fixture.errors(Fixture.config(pusher: "sign_in = true\nwatchlist = [\(ids)]")) == [
                "/etc/bridges.conf:12: error: bridge.factory.pusher.watchlist: holds 101 ids; Pusher allows at most 100 (it would keep the first 100)"
            ])
        let hundred = (1...100).map { "\"d\($0)\"" }.joined(separator: ", ")
        #expect(Fixture.errors(Fixture.config(pusher: "sign_in = true\nwatchlist = [\(hundred)]")).isEmpty)
    }

    @Test func signInNeedsTheSecretOrAnEndpoint() {
        let text = """
            [[bridge]]
            name = "factory"
            [bridge.pusher]
            key = "app-key"
            host = "127.0.0.1"
            sign_in = true
            [bridge.mqtt]
            host = "127.0.0.1"
            """
        #expect(
            Fixture.errors(text) == [
                "/etc/bridges.conf:6: error: bridge.factory.pusher.sign_in: needs pusher.secret (or secret_file) or pusher.user_auth_endpoint to sign the user_data"
            ])
    }

    @Test func aWatchlistBesideAnEndpointIsRefused() {
        let errors = Fixture.errors(
            Fixture.config(pusher: "sign_in = true\nuser_auth_endpoint = \"http://x/a\"\nwatchlist = [\"d1\"]"))
        #expect(errors.contains { $0.contains("pusher.watchlist: the user_auth_endpoint's user_data chooses the watchlist") }, "\(errors)")
    }

    @Test(arguments: [
        ("[bridge.users]\ntopic = \"dash/users\"", "users.topic: needs [bridge.pusher] sign_in = true"),
        ("[bridge.users]\ntopic = \"dash/users/\"", "users.topic: must not end with '/'"),
        ("[bridge.users]\ntopic = \"dash/{bridge}\"", "users.topic: takes no placeholders"),
        ("[bridge.users]\ntopic = \"dash/+/x\"", "users.topic: "),
        ("[bridge.users]\nqos = 1", "users.topic: required key is missing"),
        ("[bridge.users]\ntopic = \"d\"\nretain = true", "users.retain: unknown key 'retain'"),
    ])
    func badUsersSectionsAreReported(_ section: String, _ message: String) {
        let signIn = message.contains("needs [bridge.pusher]") ? "" : "sign_in = true"
        let errors = Fixture.errors(Fixture.config(pusher: signIn, extra: section))
        #expect(errors.contains { $0.contains("bridge.factory.\(message)") }, "\(errors)")
    }

    // MARK: rules

    @Test func toUserAndTerminateUserRules() throws {
        let rules = UserRoutingTests.rules
        let bridge = try Fixture.parse(Fixture.config(extra: rules)).bridges[0]
        let parsed = bridge.mqttToPusherRules
        #expect(parsed.map(\.target) == [.user, .terminateUser])
        #expect(parsed[0].channel.source == "{1}" && parsed[0].event.source == "{2}")
        #expect(parsed[1].event.source == "pusher_internal:terminate_connections")
        #expect(bridge.pusherChannels.isEmpty)
    }

    @Test(arguments: [
        (
            "to_user = \"u\"\nchannel = \"c\"\nevent = \"e\"",
            "to_user: a rule sends to one of channel, to_user or terminate_user; this one also has channel"
        ),
        ("to_user = \"a b\"\nevent = \"e\"", "to_user: ' ' can never appear in a user id"),
        ("to_user = \"{topic}\"\nevent = \"e\"", "to_user: {topic} always contains '/'"),
        ("to_user = \"u\"", "event: required key is missing"),
        ("to_user = \"u\"\nevent = \"client-e\"\nvia = \"client-event\"", "via: to_user goes through the HTTP API"),
        ("terminate_user = \"u\"\nevent = \"e\"", "event: terminate_user sends no event: the message's payload is ignored; remove event"),
        ("terminate_user = \"u\"\npayload = \"envelope\"", "payload: terminate_user sends no event"),
        ("event = \"e\"", "channel: required key is missing (or to_user, or terminate_user)"),
        ("to_user = \"\(String(repeating: "u", count: 201))\"\nevent = \"e\"", "to_user: is longer than 200 characters"),
    ])
    func badUserRulesAreReportedAtTheirKey(_ keys: String, _ message: String) {
        let rule = "[[bridge.rule]]\nname = \"r\"\nfrom = \"mqtt\"\ntopic = \"a/+/b\"\n" + keys
        let errors = Fixture.errors(Fixture.config(extra: rule))
        #expect(errors.contains { $0.contains("bridge.factory.rule.r.\(message)") }, "\(errors)")
    }

    @Test func userRulesNeedTheHTTPAPI() {
        let text = """
            [[bridge]]
            name = "factory"
            [bridge.pusher]
            key = "app-key"
            host = "127.0.0.1"
            [bridge.mqtt]
            host = "127.0.0.1"
            [[bridge.rule]]
            name = "revoke"
            from = "mqtt"
            topic = "admin/terminate/+"
            terminate_user = "{1}"
            """
        let errors = Fixture.errors(text)
        #expect(errors.contains { $0.contains("rule.revoke: publishes into Pusher through the HTTP API, which needs pusher.app_id") })
    }

    /// `[bridge.users]` lives in the supervisor: a change restarts the bridge (a swap of rules in
    /// place would keep the old mirror); a new watchlist replaces the Pusher connections, which sign
    /// in again with it.
    @Test func reloads() throws {
        let plain = try Fixture.parse(Fixture.config(pusher: "sign_in = true"))
        let users = try Fixture.parse(Fixture.config(pusher: "sign_in = true", extra: Self.users))
        #expect(ReloadPlan(old: plain, new: users).restarted.map(\.name) == ["factory"])
        #expect(ReloadPlan(old: users, new: plain).restarted.map(\.name) == ["factory"])
        let watching = try Fixture.parse(Fixture.config(pusher: "sign_in = true\nwatchlist = [\"d1\"]", extra: Self.users))
        #expect(ReloadPlan(old: users, new: watching).pusherReplaced.map(\.name) == ["factory"])
    }
}
