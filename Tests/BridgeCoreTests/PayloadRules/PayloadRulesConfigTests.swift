import Testing

@testable import BridgeCore

/// The payload keys of rules in `bridges.conf` (docs/contract.md §7.3): what loads, and what
/// `check` says with file:line:column when it does not.
@Suite("Payload rules: config keys and check")
struct PayloadRulesConfigTests {
    static let zigbee = """
        [[bridge.rule]]
        name = "zigbee"
        from = "mqtt"
        topic = "zigbee2mqtt/+"
        channel = "private-room-{json:/room}"
        event = "{1}"
        where = "/temperature > 20 and exists /battery"
        payload = "json:/temperature"
        throttle = "1s"
        on_change = true
        max_targets = 500

        [[bridge.rule]]
        name = "alarms"
        from = "pusher"
        channel = "alarms"
        topic = "alarms/{json:/device/id}/{event}"
        where = "/level >= 3"
        """

    /// The 1-based line of the first line of `extra` that contains `needle`, in the fixture config.
    static func line(of needle: String, in text: String) -> Int {
        (text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(needle) } ?? -1) + 1
    }

    @Test func everyPayloadKeyLoads() throws {
        let settings = try #require(Fixture.parse(Fixture.config(extra: Self.zigbee)).bridges.first)
        let mqtt = try #require(settings.mqttToPusherRules.first)
        #expect(mqtt.channel.jsonPointers.map(\.source) == ["/room"])
        #expect(mqtt.conditions.condition?.source == "/temperature > 20 and exists /battery")
        #expect(mqtt.payload == .projection(try JSONPointer.parse("/temperature").get()))
        #expect(mqtt.conditions.throttle == .seconds(1))
        #expect(mqtt.conditions.onChange)
        #expect(mqtt.conditions.maxTargets == 500)
        #expect(mqtt.readsPayload)
        let pusher = try #require(settings.pusherToMQTTRules.first)
        #expect(pusher.topic.jsonPointers.map(\.source) == ["/device/id"])
        #expect(pusher.conditions.condition != nil)
        #expect(pusher.conditions.throttle == nil && !pusher.conditions.onChange)
    }

    @Test func rulesWithoutPayloadKeysReadNoPayload() throws {
        let settings = try #require(
            Fixture.parse(
                Fixture.config(
                    extra: """
                        [[bridge.rule]]
                        name = "plain"
                        from = "mqtt"
                        topic = "sensors/+"
                        channel = "sensor-{1}"
                        event = "reading"
                        """)
            ).bridges.first)
        let rule = try #require(settings.mqttToPusherRules.first)
        #expect(!rule.readsPayload)
        #expect(rule.conditions == .none)
        #expect(rule.payload == .data)
    }

    @Test func whereSyntaxErrorPointsAtItsColumnInTheFile() throws {
        let extra = """
            [[bridge.rule]]
            name = "hot"
            from = "mqtt"
            topic = "sensors/+"
            channel = "sensor-{1}"
            event = "reading"
            where = "/temperature >> 30"
            """
        let text = Fixture.config(extra: extra)
        let errors = Fixture.errors(text)
        let line = Self.line(of: "where =", in: text)
        #expect(errors.count == 1)
        let error = try #require(errors.first)
        // `where = "` is 9 characters: the expression's first character is column 10.
        #expect(error.hasPrefix("/etc/bridges.conf:\(line):"), "\(error)")
        let column = try #require(Int(error.split(separator: ":")[2]))
        #expect(column >= 10 + 13 && column <= 10 + 15, "\(error)")
        #expect(error.contains("bridge.factory.rule.hot.where"))
    }

    @Test func whereColumnCountsEscapedQuotesAsOneCharacter() throws {
        let extra = #"""
            [[bridge.rule]]
            name = "units"
            from = "mqtt"
            topic = "sensors/+"
            channel = "sensor-{1}"
            event = "reading"
            where = "/unit == \"C\" and"
            """#
        let text = Fixture.config(extra: extra)
        let error = try #require(Fixture.errors(text).first)
        let column = try #require(Int(error.split(separator: ":")[2]))
        // The expression `/unit == "C" and` is 16 characters; in the file it takes 18 (two
        // backslashes), starting at column 10: its end is column 27, the error is at or after it.
        #expect(column >= 10 + 14 && column <= 28, "\(error)")
    }

    @Test func badPointersAreRefusedWithTheirKey() throws {
        let cases: [(String, String)] = [
            (#"payload = "json:a/b""#, "payload"),
            (#"payload = "json:/a~2""#, "payload"),
            (#"channel = "sensor-{json:a}""#, "channel"),
            (#"event = "e-{json:/x~}""#, "event"),
            (#"payload = "jsno""#, "payload"),
        ]
        for (line, key) in cases {
            var extra = """
                [[bridge.rule]]
                name = "r"
                from = "mqtt"
                topic = "sensors/+"
                channel = "sensor-{1}"
                event = "reading"
                """
            let replaced = extra.split(separator: "\n").map { String($0) }.map { existing in
                existing.hasPrefix(key + " =") ? line : existing
            }
            extra = replaced.contains(line) ? replaced.joined(separator: "\n") : extra + "\n" + line
            let errors = Fixture.errors(Fixture.config(extra: extra))
            #expect(errors.count == 1, "\(line): \(errors)")
            #expect(errors.first?.contains("bridge.factory.rule.r.\(key)") == true, "\(line): \(errors)")
        }
    }

    @Test func shapingKeysAreValidated() throws {
        let cases: [(String, String)] = [
            (#"throttle = "fast""#, "throttle"),
            (#"throttle = "1ms""#, "at least"),
            ("throttle = 5", "duration"),
            (#"on_change = "yes""#, "expected true or false"),
            ("max_targets = 0", "max_targets"),
            ("max_targets = 100", "only applies with throttle or on_change"),
            ("where = 3", "string"),
            (#"where = """#, "where"),
        ]
        for (line, expected) in cases {
            let extra = """
                [[bridge.rule]]
                name = "r"
                from = "pusher"
                channel = "c"
                topic = "t/{event}"
                \(line)
                """
            let errors = Fixture.errors(Fixture.config(extra: extra))
            #expect(errors.count == 1, "\(line): \(errors)")
            #expect(errors.first?.contains(expected) == true, "\(line): \(errors)")
        }
    }

    @Test func checkReportListsConditions() throws {
        let configuration = try Fixture.parse(Fixture.config(extra: Self.zigbee))
        let report = CheckReport.render(configuration, file: "bridges.conf")
        #expect(report.contains("json:/temperature"))
        #expect(report.contains("rule zigbee: where /temperature > 20 and exists /battery; throttle 1s per target"))
        #expect(report.contains("on_change"))
        #expect(report.contains("rule alarms: where /level >= 3"))
    }
}
