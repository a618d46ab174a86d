import BridgeVocabulary
import Testing

@testable import BridgeCore

/// MQTT → Pusher rules with `to_user` and `terminate_user` (docs/contract.md §8.2): what the
/// rule table makes of a message.
@Suite struct UserRoutingTests {
    static let rules = """
        [[bridge.rule]]
        name = "notify"
        from = "mqtt"
        topic = "notify/+/+"
        to_user = "{1}"
        event = "{2}"

        [[bridge.rule]]
        name = "revoke"
        from = "mqtt"
        topic = "admin/terminate/+"
        terminate_user = "{1}"
        """

    static func table() throws -> RuleTable {
        RuleTable(bridge: try #require(Fixture.parse(Fixture.config(extra: rules)).bridges.first))
    }

    func route(_ table: RuleTable, _ topic: String, _ payload: String) -> MQTTMessageRouting {
        table.route(topic: topic, payload: Array(payload.utf8), qos: 1, retain: false, receivedAt: Fixture.time)
    }

    @Test func aMessageToAUserIsAnEventOnItsServerToUserChannel() throws {
        let routing = route(try Self.table(), "notify/u1/alert", #"{"level":3}"#)
        #expect(
            routing.events == [
                PusherEventPublish(rule: "notify", channel: "#server-to-user-u1", event: "alert", data: #"{"level":3}"#, via: .http)
            ])
        #expect(!routing.events[0].terminatesUser)
    }

    @Test func aTerminationIgnoresThePayload() throws {
        let routing = route(try Self.table(), "admin/terminate/u1", "\u{FF}not even UTF-8")
        #expect(routing.deadLetters.isEmpty)
        #expect(routing.events.count == 1)
        #expect(routing.events.first?.terminatesUser == true)
        #expect(routing.events.first?.channel == "#server-to-user-u1")
        #expect(routing.events.first?.data == "")
    }

    @Test(arguments: ["notify/a%20b/alert", "admin/terminate/caf\u{e9}", "notify/a#b/alert"])
    func aUserIDOutsideTheAlphabetIsADeadLetter(_ topic: String) throws {
        let routing = route(try Self.table(), topic, "{}")
        #expect(routing.events.isEmpty)
        #expect(routing.deadLetters.map(\.reason.code) == ["invalid_user"])
        #expect(routing.deadLetters.first?.reason.description.contains("rendered user id") == true)
    }

    @Test func aTooLongUserIDIsADeadLetter() throws {
        let routing = route(try Self.table(), "notify/" + String(repeating: "u", count: 201) + "/alert", "{}")
        #expect(routing.deadLetters.map(\.reason.code) == ["invalid_user"])
    }

    @Test func routeAndCheckExplainThem() throws {
        let config = try Fixture.parse(
            Fixture.config(pusher: "sign_in = true", extra: Self.rules + "\n[bridge.users]\ntopic = \"dash/users\""))
        let notify = RouteExplanation.explain(topic: "notify/u1/alert", payload: Array("hi".utf8), in: config, receivedAt: Fixture.time)
        #expect(notify.contains(#"rule notify: MATCH -> user "u1" (every signed-in connection, channel #server-to-user-u1) event "alert""#))
        let revoke = RouteExplanation.explain(topic: "admin/terminate/u1", payload: [], in: config, receivedAt: Fixture.time)
        #expect(revoke.contains(#"rule revoke: MATCH -> terminate the connections of user "u1""#))
        let bad = RouteExplanation.explain(topic: "admin/terminate/a b", payload: [], in: config, receivedAt: Fixture.time)
        #expect(bad.contains("invalid_user") || bad.contains("rendered user id"), "\(bad)")
        let check = CheckReport.render(config, file: "bridges.conf")
        #expect(check.contains("signs in as pusher-mqtt-bridge-factory (signed with the secret), users -> dash/users/<id>/online"))
        #expect(check.contains("to_user {1} event {2}") && check.contains("terminate_user {1}"))
    }
}
