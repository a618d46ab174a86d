import MQTTVocabulary
import Testing

@testable import BridgeCore

@Suite("Rule table routing")
struct RuleTableTests {
    static let rules = """
        [[bridge.rule]]
        name = "temperatures"
        from = "mqtt"
        topic = "sensors/+/temperature"
        channel = "sensor-{1}"
        event = "temperature"

        [[bridge.rule]]
        name = "all-sensors"
        from = "mqtt"
        topic = "sensors/#"
        channel = "firehose"
        event = "reading"
        payload = "envelope"
        forward_retained = true

        [[bridge.rule]]
        name = "prices"
        from = "pusher"
        channel = "market-data"
        events = ["new-price"]
        topic = "dash/prices/{event}"
        qos = 2
        retain = true

        [[bridge.rule]]
        name = "chat"
        from = "pusher"
        channel = "presence-chat"
        topic = "chat/{user_id}/{event}"
        payload = "envelope"
        """

    static func table(pusher: String = "", mqtt: String = "") throws -> RuleTable {
        let configuration = try Fixture.parse(Fixture.config(pusher: pusher, mqtt: mqtt, extra: rules))
        return RuleTable(bridge: try #require(configuration.bridges.first))
    }

    @Test func mqttMessageMatchesTwoRulesInFileOrder() throws {
        let routing = try Self.table().route(
            topic: "sensors/kitchen/temperature", payload: Array("21.5".utf8), qos: 1, retain: false, receivedAt: Fixture.time)
        #expect(
            routing.events == [
                PusherEventPublish(rule: "temperatures", channel: "sensor-kitchen", event: "temperature", data: "21.5", via: .http),
                PusherEventPublish(
                    rule: "all-sensors", channel: "firehose", event: "reading",
                    data:
                        #"{"topic":"sensors/kitchen/temperature","payload":21.5,"qos":1,"retain":false,"received_at":"2026-11-18T11:06:40.123Z"}"#,
                    via: .http),
            ])
        #expect(routing.deadLetters.isEmpty)
    }

    @Test func envelopeEmbedsNonJSONPayloadAsString() throws {
        let routing = try Self.table().route(
            topic: "sensors/door", payload: Array("open \"now\"".utf8), qos: 0, retain: false, receivedAt: Fixture.time)
        #expect(
            routing.events.map(\.data) == [
                #"{"topic":"sensors/door","payload":"open \"now\"","qos":0,"retain":false,"received_at":"2026-11-18T11:06:40.123Z"}"#
            ])
    }

    @Test func retainedMessagesAreSkippedUnlessForwardRetained() throws {
        let routing = try Self.table().route(
            topic: "sensors/hall/temperature", payload: Array("19".utf8), qos: 1, retain: true, receivedAt: Fixture.time)
        #expect(routing.skipped == [SkippedMatch(rule: "temperatures", reason: "retained message; forward_retained = false")])
        #expect(routing.events.map(\.rule) == ["all-sensors"])
    }

    @Test func invalidUTF8IsDeadLettered() throws {
        let payload: [UInt8] = [0xFF, 0xFE]
        let routing = try Self.table().route(
            topic: "sensors/x/temperature", payload: payload, qos: 1, retain: false, receivedAt: Fixture.time)
        #expect(routing.events.isEmpty)
        #expect(routing.deadLetters.map(\.reason) == [.invalidUTF8, .invalidUTF8])
        let json = String(decoding: routing.deadLetters[0].jsonPayload, as: UTF8.self)
        #expect(
            json
                == #"{"reason":"payload is not valid UTF-8","code":"invalid_utf8","rule":"temperatures","source":{"mqtt_topic":"sensors/x/temperature"},"payload_base64":"//4="}"#
        )
    }

    @Test func renderedChannelThatBreaksTheRulesIsDeadLettered() throws {
        let routing = try Self.table().route(
            topic: "sensors/living room/temperature", payload: Array("1".utf8), qos: 1, retain: false, receivedAt: Fixture.time)
        #expect(
            routing.deadLetters.map(\.reason) == [
                .invalidChannelName("sensor-living room", problem: "channel name contains ' '; allowed are A-Z a-z 0-9 _ - = @ , . ;")
            ])
        #expect(routing.events.map(\.rule) == ["all-sensors"])
    }

    @Test func dataOverTheLimitIsDeadLettered() throws {
        let table = try Self.table(pusher: "max_event_bytes = \"1KiB\"")
        let routing = table.route(
            topic: "sensors/a/temperature", payload: Array(repeating: UInt8(ascii: "x"), count: 1025), qos: 1, retain: false,
            receivedAt: Fixture.time)
        #expect(routing.deadLetters.first?.reason == .dataTooLarge(bytes: 1025, limit: 1024))
    }

    @Test func unmatchedTopicRoutesNowhere() throws {
        let routing = try Self.table().route(topic: "other/x", payload: [], qos: 0, retain: false, receivedAt: Fixture.time)
        #expect(routing.isUnmatched)
    }

    @Test func pusherEventBecomesRetainedPublishWithUserProperties() throws {
        let routing = try Self.table().route(
            channel: "market-data", event: "new-price", data: #"{"usd":1.5}"#, userID: nil, receivedAt: Fixture.time)
        #expect(
            routing.publishes == [
                MQTTPublish(
                    rule: "prices", topic: "dash/prices/new-price", payload: Array(#"{"usd":1.5}"#.utf8), qos: 2, retain: true,
                    userProperties: [MQTTUserProperty("pusher-channel", "market-data"), MQTTUserProperty("pusher-event", "new-price")])
            ])
    }

    @Test func mqtt311HasNoUserProperties() throws {
        let routing = try Self.table(mqtt: "protocol = 4").route(
            channel: "market-data", event: "new-price", data: "1", userID: nil, receivedAt: Fixture.time)
        #expect(routing.publishes.first?.userProperties == [])
    }

    @Test func unselectedAndProtocolEventsAreNotRouted() throws {
        let table = try Self.table()
        #expect(table.route(channel: "market-data", event: "old-price", data: "1", userID: nil, receivedAt: Fixture.time).isUnmatched)
        #expect(
            table.route(channel: "presence-chat", event: "pusher_internal:member_added", data: "{}", userID: nil, receivedAt: Fixture.time)
                .isUnmatched)
    }

    @Test func userIDIsEscapedAndEnvelopeCarriesIt() throws {
        let routing = try Self.table().route(
            channel: "presence-chat", event: "client-msg", data: "hi", userID: "ann/1", receivedAt: Fixture.time)
        let publish = try #require(routing.publishes.first)
        #expect(publish.topic == "chat/ann%2F1/client-msg")
        #expect(
            String(decoding: publish.payload, as: UTF8.self)
                == #"{"channel":"presence-chat","event":"client-msg","data":"hi","user_id":"ann/1","bridge":"factory","received_at":"2026-11-18T11:06:40.123Z"}"#
        )
        #expect(publish.userProperties.last == MQTTUserProperty("pusher-user-id", "ann/1"))
    }

    @Test func missingUserIDIsDeadLettered() throws {
        let routing = try Self.table().route(
            channel: "presence-chat", event: "client-msg", data: "hi", userID: nil, receivedAt: Fixture.time)
        #expect(routing.deadLetters.map(\.reason) == [.missingPlaceholderValue("user_id")])
    }

    @Test func clientEventRulesSubscribeTheirChannel() throws {
        let configuration = try Fixture.parse(
            Fixture.config(
                extra:
                    "[[bridge.rule]]\nname = \"ce\"\nfrom = \"mqtt\"\ntopic = \"chat/+\"\nchannel = \"private-chat\"\nevent = \"client-{1}\"\nvia = \"client-event\"\n"
            ))
        let bridge = try #require(configuration.bridges.first)
        #expect(bridge.pusherChannels == ["private-chat"])
        let routing = RuleTable(bridge: bridge).route(
            topic: "chat/msg", payload: Array("hi".utf8), qos: 1, retain: false, receivedAt: Fixture.time)
        #expect(
            routing.events == [PusherEventPublish(rule: "ce", channel: "private-chat", event: "client-msg", data: "hi", via: .clientEvent)])
    }

    @Test func subscriptionsAndChannelsForTheDaemon() throws {
        let configuration = try Fixture.parse(
            Fixture.config(extra: Self.rules + "\n[[bridge.presence]]\nchannel = \"presence-chat\"\ntopic = \"who\"\nqos = 0\n"))
        let bridge = try #require(configuration.bridges.first)
        #expect(bridge.pusherChannels == ["market-data", "presence-chat"])
        #expect(
            bridge.mqttSubscriptions == [
                BridgeSubscription(
                    MQTTSubscription("sensors/+/temperature", qos: .atLeastOnce, noLocal: true, retainHandling: .never),
                    purposes: ["rule temperatures"]),
                BridgeSubscription(
                    MQTTSubscription("sensors/#", qos: .atLeastOnce, noLocal: true, retainHandling: .sendAlways),
                    purposes: ["rule all-sensors"]),
                BridgeSubscription(
                    MQTTSubscription("who/members/+", qos: .atMostOnce, noLocal: false, retainHandling: .sendAlways),
                    purposes: ["presence presence-chat"]),
            ])
    }
}

@Suite("Topics as bytes in the configuration")
struct TopicBytesConfigTests {
    static func rule(_ name: String, topic: String) -> String {
        "[[bridge.rule]]\nname = \"\(name)\"\nfrom = \"mqtt\"\ntopic = \"\(topic)\"\nchannel = \"c-\(name)\"\nevent = \"e\"\n"
    }

    /// `é` and `e` + U+0301 are two filters to a broker, so two subscriptions, and a message on
    /// one reaches only its own rule.
    @Test func filtersThatDifferOnlyInNormalisationAreTwoSubscriptions() throws {
        let configuration = try Fixture.parse(
            Fixture.config(extra: Self.rule("composed", topic: "caf\u{E9}/+") + Self.rule("decomposed", topic: "cafe\u{301}/+")))
        let bridge = try #require(configuration.bridges.first)
        #expect(bridge.mqttSubscriptions.map { Array($0.filter.utf8) } == [Array("caf\u{E9}/+".utf8), Array("cafe\u{301}/+".utf8)])
        let routing = RuleTable(bridge: bridge).route(
            topic: "cafe\u{301}/x", payload: Array("1".utf8), qos: 1, retain: false, receivedAt: Fixture.time)
        #expect(routing.events.map(\.rule) == ["decomposed"])
    }

    /// `$` followed by a combining mark still starts a broker-reserved topic; a `+` glued to a
    /// combining mark is still a wildcard byte.
    @Test(arguments: ["$\u{59C}/x", "a/+\u{301}"])
    func topicTemplatesAreCheckedByTheirBytes(_ topic: String) throws {
        let text = Fixture.config(
            extra: "[[bridge.rule]]\nname = \"p\"\nfrom = \"pusher\"\nchannel = \"c\"\ntopic = \"\(topic)\"\n")
        #expect(throws: (any Error).self) { try Fixture.parse(text) }
    }
}

@Suite("Config diff for reload")
struct ConfigDiffTests {
    @Test func classifiesBridges() throws {
        func bridge(_ name: String, port: Int) -> String {
            "[[bridge]]\nname = \"\(name)\"\n[bridge.pusher]\nkey = \"k\"\n[bridge.mqtt]\nport = \(port)\n"
        }
        let old = try Fixture.parse(bridge("a", port: 1883) + bridge("b", port: 1883) + bridge("c", port: 1883))
        let new = try Fixture.parse(
            "[daemon]\nlog_level = \"debug\"\n" + bridge("a", port: 1883) + bridge("b", port: 1884) + bridge("d", port: 1883))
        let diff = ConfigDiff(from: old, to: new)
        #expect(diff.unchanged == ["a"])
        #expect(diff.changed == ["b"])
        #expect(diff.added == ["d"])
        #expect(diff.removed == ["c"])
        #expect(diff.daemonChanged)
        #expect(ConfigDiff(from: old, to: old).isEmpty)
    }
}
