import Testing

@testable import BridgeCore

/// `[daemon] homeassistant` and `homeassistant_prefix` (docs/contract.md §8.3): defaults, good
/// values, every bad input with its position, and what a reload does with a change.
@Suite struct HomeAssistantConfigTests {
    static func daemon(_ lines: String) -> String { "[daemon]\n\(lines)\n" + Fixture.config() }

    @Test func offByDefault() throws {
        let settings = try Fixture.parse(Fixture.config()).daemon.homeAssistant
        #expect(settings == HomeAssistantSettings(enabled: false, prefix: "homeassistant"))
        #expect(settings.birthTopic == "homeassistant/status")
    }

    @Test func onWithAPrefix() throws {
        let settings = try Fixture.parse(Self.daemon("homeassistant = true\nhomeassistant_prefix = \"home/ha\"")).daemon.homeAssistant
        #expect(settings == HomeAssistantSettings(enabled: true, prefix: "home/ha"))
        #expect(settings.birthTopic == "home/ha/status")
    }

    @Test(arguments: [
        (#"homeassistant = "yes""#, "/etc/bridges.conf:2: error: daemon.homeassistant: expected true or false, found a string"),
        (#"homeassistant = 1"#, "/etc/bridges.conf:2: error: daemon.homeassistant: expected true or false, found an integer"),
        (
            #"homeassistant_prefix = """#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: is empty; Home Assistant's default is \"homeassistant\""
        ),
        (
            #"homeassistant_prefix = "ha/#""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: topic contains a wildcard ('+' or '#')"
        ),
        (
            #"homeassistant_prefix = "ha/+/x""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: topic contains a wildcard ('+' or '#')"
        ),
        (
            #"homeassistant_prefix = "ha/""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: has an empty topic level (a leading, trailing or doubled '/'): \"ha/\""
        ),
        (
            #"homeassistant_prefix = "/ha""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: has an empty topic level (a leading, trailing or doubled '/'): \"/ha\""
        ),
        (
            #"homeassistant_prefix = "a//b""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: has an empty topic level (a leading, trailing or doubled '/'): \"a//b\""
        ),
        (
            #"homeassistant_prefix = "ha\u0001""#,
            "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: topic contains the control character U+0001, which the MQTT client (libmosquitto) refuses"
        ),
        (#"homeassistant_prefix = 7"#, "/etc/bridges.conf:2: error: daemon.homeassistant_prefix: expected a string, found an integer"),
        (
            #"home_assistant = true"#,
            "/etc/bridges.conf:2: error: daemon.home_assistant: unknown key 'home_assistant' (did you mean 'homeassistant'?)"
        ),
    ])
    func badValuesAreRefusedAtTheirLine(line: String, expected: String) {
        #expect(Fixture.errors(Self.daemon(line)) == [expected])
    }

    @Test func topicsTooLongForTheClientAreRefused() {
        let prefix = String(repeating: "p", count: 65_490)
        #expect(Fixture.errors(Self.daemon("homeassistant_prefix = \"\(prefix)\"")) == [], "off: the prefix is not used")
        #expect(
            Fixture.errors(Self.daemon("homeassistant = true\nhomeassistant_prefix = \"\(prefix)\"")) == [
                "/etc/bridges.conf:3: error: daemon.homeassistant_prefix: the Home Assistant config topics of bridge factory "
                    + "(<prefix>/<component>/pusher_mqtt_bridge_factory/<entity>/config): topic is longer than 65535 bytes"
            ])
        let status = String(repeating: "s", count: 65_530)
        let text = "[daemon]\nhomeassistant = true\n" + Fixture.config(mqtt: "status_topic = \"\(status)\"")
        let errors = Fixture.errors(text)
        #expect(errors.count == 1)
        #expect(
            errors.first?.hasSuffix(
                "error: bridge.factory.mqtt.status_topic: the Home Assistant state goes to <status topic>/state, which: topic is longer than 65535 bytes"
            )
                == true)
    }

    @Test func aReloadAppliesDiscoveryInPlace() throws {
        let old = try Fixture.parse(Fixture.config())
        let new = try Fixture.parse(Self.daemon("homeassistant = true"))
        let plan = ReloadPlan(old: old, new: new)
        #expect(plan.homeAssistant == HomeAssistantSettings(enabled: true))
        #expect(!plan.daemonChanged)
        #expect(plan.unchanged == ["factory"])
        #expect(plan.restarted.isEmpty && plan.rulesChanged.isEmpty)
        let back = ReloadPlan(old: new, new: old)
        #expect(back.homeAssistant == HomeAssistantSettings(enabled: false))
        let both = ReloadPlan(old: old, new: try Fixture.parse(Self.daemon("homeassistant = true\nlog_level = \"debug\"")))
        #expect(both.daemonChanged)
        #expect(both.homeAssistant?.enabled == true)
        #expect(ReloadPlan(old: new, new: new).homeAssistant == nil)
    }

    @Test func checkSaysWhereEachDeviceGoes() throws {
        let off = CheckReport.render(try Fixture.parse(Fixture.config()), file: "f")
        #expect(!off.contains("homeassistant") && !off.contains("Home Assistant"))
        let report = CheckReport.render(try Fixture.parse(Self.daemon("homeassistant = true")), file: "f")
        #expect(report.contains(", Home Assistant discovery under homeassistant/"))
        #expect(
            report.contains(
                "  homeassistant: device pusher_mqtt_bridge_factory, 6 entities "
                    + "(homeassistant/<component>/pusher_mqtt_bridge_factory/<entity>/config), state pusher-mqtt-bridge/factory/status/state"
            ))
    }

    @Test func devicesLeaveWithTheirBridgeOrTheirInstanceName() throws {
        func config(_ daemon: String, instance: String, gone: Bool, port: Int = 1883) throws -> BridgeConfiguration {
            let cluster = "[bridge.cluster]\ngroup = \"g\"\ninstance = \"\(instance)\"\n"
            return try ReloadPlanTests.config(
                "[daemon]\n\(daemon)\n" + ReloadPlanTests.bridge("member", port: port) + cluster + ReloadPlanTests.bridge("kept")
                    + (gone ? "" : ReloadPlanTests.bridge("gone")))
        }
        let old = try config("homeassistant = true", instance: "a", gone: false)
        let plan = ReloadPlan(old: old, new: try config("homeassistant = true", instance: "b", gone: true))
        #expect(plan.restarted.map(\.name) == ["member"])
        #expect(plan.homeAssistantDevicesLeaving == ["gone", "member"])
        #expect(plan.homeAssistant == nil)
        // Another connection setting restarts the bridge as the same device: it stays.
        let same = ReloadPlan(old: old, new: try config("homeassistant = true", instance: "a", gone: true, port: 1884))
        #expect(same.restarted.map(\.name) == ["member"])
        #expect(same.homeAssistantDevicesLeaving == ["gone"])
        // Off before the reload: there is nothing to remove.
        let off = try config("", instance: "a", gone: false)
        #expect(ReloadPlan(old: off, new: try config("", instance: "b", gone: true)).homeAssistantDevicesLeaving.isEmpty)
    }
}
