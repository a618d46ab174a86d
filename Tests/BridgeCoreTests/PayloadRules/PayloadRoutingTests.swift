import TestSupport
import Testing

@testable import BridgeCore

/// Routing on what is inside a payload (docs/contract.md §7.3): `{json:…}` in templates, `where`,
/// `json:` projection, dead letters with `template_value_missing`, the `filtered` outcome, and
/// `route`'s explanation.
@Suite("Payload rules: routing")
struct PayloadRoutingTests {
    static let rules = """
        [[bridge.rule]]
        name = "zigbee"
        from = "mqtt"
        topic = "zigbee2mqtt/+"
        channel = "private-room-{json:/room}"
        event = "{1}-{json:/kind}"
        where = "/battery > 20"

        [[bridge.rule]]
        name = "temperature"
        from = "mqtt"
        topic = "zigbee2mqtt/+"
        channel = "temperature"
        event = "{1}"
        payload = "json:/temperature"

        [[bridge.rule]]
        name = "alarms"
        from = "pusher"
        channel = "alarms"
        topic = "alarms/{json:/device/id}/{event}"
        where = "/level >= 3"
        payload = "json:/message"
        """

    static func table() throws -> RuleTable {
        RuleTable(bridge: try #require(Fixture.parse(Fixture.config(extra: rules)).bridges.first))
    }

    func route(_ table: RuleTable, topic: String = "zigbee2mqtt/kitchen", _ payload: String) -> MQTTMessageRouting {
        table.route(topic: topic, payload: Array(payload.utf8), qos: 1, retain: false, receivedAt: Fixture.time)
    }

    @Test func jsonValuesRenderIntoNamesAndProjection() throws {
        let routing = route(try Self.table(), #"{"room":"kitchen","kind":"climate","battery":87,"temperature":21.50}"#)
        #expect(routing.deadLetters.isEmpty)
        #expect(routing.events.map(\.channel) == ["private-room-kitchen", "temperature"])
        #expect(routing.events.map(\.event) == ["kitchen-climate", "kitchen"])
        // A number is forwarded as its JSON text exactly as written.
        #expect(routing.events.last?.data == "21.50")
        #expect(routing.events.first?.data == #"{"room":"kitchen","kind":"climate","battery":87,"temperature":21.50}"#)
    }

    @Test func whereThatDoesNotMatchIsFilteredNotDeadLettered() throws {
        let routing = route(try Self.table(), #"{"room":"kitchen","kind":"climate","battery":12,"temperature":21}"#)
        #expect(routing.filtered == ["zigbee"])
        #expect(routing.events.map(\.rule) == ["temperature"])
        #expect(routing.deadLetters.isEmpty)
        #expect(!routing.isUnmatched)
    }

    @Test func missingNullObjectOrNotJSONIsTemplateValueMissing() throws {
        let table = try Self.table()
        let payloads = [
            #"{"kind":"climate","battery":87,"temperature":1}"#,  // no room
            #"{"room":null,"kind":"climate","battery":87,"temperature":1}"#,
            #"{"room":{"a":1},"kind":"climate","battery":87,"temperature":1}"#,
            #"{"room":["a"],"kind":"climate","battery":87,"temperature":1}"#,
        ]
        for payload in payloads {
            let routing = route(table, payload)
            let letter = try #require(routing.deadLetters.first { $0.rule == "zigbee" }, "\(payload)")
            #expect(letter.reason.code == "template_value_missing", "\(payload)")
        }
        // Not JSON: `where` reads a missing value (false), so the first rule is filtered; the
        // projection has nothing to forward.
        let routing = route(table, "21.5 degrees")
        #expect(routing.filtered == ["zigbee"])
        #expect(routing.deadLetters.map(\.reason.code) == ["template_value_missing"])
        #expect(routing.deadLetters.first?.rule == "temperature")
    }

    @Test func valuesAreEscapedInTopicsButCheckedInNames() throws {
        let table = try Self.table()
        let published = table.route(
            channel: "alarms", event: "fire", data: #"{"level":4,"device":{"id":"a/b+#"},"message":"hot"}"#, userID: nil,
            receivedAt: Fixture.time)
        #expect(published.publishes.map(\.topic) == ["alarms/a%2Fb%2B%23/fire"])
        #expect(published.publishes.first.map { String(decoding: $0.payload, as: UTF8.self) } == "hot")
        // A value with a character no channel name allows: dead letter for the name, not a crash.
        let routing = route(table, #"{"room":"kitchen sink","kind":"climate","battery":87,"temperature":1}"#)
        #expect(routing.deadLetters.map(\.reason.code) == ["invalid_channel"])
    }

    @Test func pusherWhereFiltersEvents() throws {
        let table = try Self.table()
        let routing = table.route(
            channel: "alarms", event: "fire", data: #"{"level":2,"device":{"id":"7"},"message":"warm"}"#, userID: nil,
            receivedAt: Fixture.time)
        #expect(routing.publishes.isEmpty)
        #expect(routing.filtered == ["alarms"])
        #expect(!routing.isUnmatched)
    }

    @Test func machineCountsFilteredPerRule() throws {
        var machine = BridgeStateMachine<TestInstant>(
            settings: try #require(Fixture.parse(Fixture.config(extra: Self.rules)).bridges.first))
        var actions: [BridgeStateMachine<TestInstant>.Action] = []
        machine.pusherEventReceived(
            channel: "alarms", event: "fire", data: #"{"level":1}"#, userID: nil, receivedAt: Fixture.time,
            now: TestInstant.at(milliseconds: 0), into: &actions)
        #expect(
            actions == [
                .received(.pusherToMQTT, by: 1), .count(rule: "alarms", direction: .pusherToMQTT, outcome: .filtered, by: 1),
            ])
    }

    @Test func routeExplainsPointerValuesAndTheDecidingTerm() throws {
        let configuration = try Fixture.parse(Fixture.config(extra: Self.rules))
        let text = RouteExplanation.explain(
            topic: "zigbee2mqtt/kitchen", payload: Array(#"{"room":"kitchen","kind":"climate","battery":12,"temperature":21}"#.utf8),
            in: configuration, receivedAt: Fixture.time)
        #expect(text.contains("rule zigbee: MATCH, FILTERED"), "\(text)")
        #expect(text.contains("where /battery > 20 -> false"), "\(text)")
        #expect(text.contains("decided by /battery > 20"), "\(text)")
        #expect(text.contains("/battery = 12 (number)"), "\(text)")
        #expect(text.contains("/room = \"kitchen\" (string)"), "\(text)")
        #expect(text.contains("rule temperature: MATCH -> pusher channel \"temperature\""), "\(text)")
    }
}
