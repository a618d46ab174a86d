import Testing

@testable import BridgeCore

/// `[bridge.cluster]` (docs/contract.md §7.4): defaults, derived values, every bad input with its
/// position, `check`, reload.
@Suite struct ClusterConfigTests {
    /// A bridge whose `[bridge.cluster]` starts at line 12, its first key at line 13; `mqtt` is line 11.
    static func config(_ cluster: String, mqtt: String = "") -> String {
        """
        [[bridge]]
        name = "factory"
        [bridge.pusher]
        key = "app-key"
        secret = "s"
        host = "127.0.0.1"
        port = 6001
        tls = false
        [bridge.mqtt]
        host = "127.0.0.1"
        \(mqtt)
        [bridge.cluster]
        \(cluster)
        """
    }

    static let minimal = "group = \"factory\"\ninstance = \"node-1\""

    @Test func defaultsAndDerivedValues() throws {
        let bridge = try #require(try Fixture.parse(Self.config(Self.minimal)).bridges.first)
        let cluster = try #require(bridge.cluster)
        #expect(cluster == ClusterSettings(group: "factory", instance: "node-1"))
        #expect(cluster.membershipTopic == "pusher-mqtt-bridge/cluster/factory")
        #expect(cluster.heartbeatInterval == .seconds(1))
        #expect(cluster.memberTimeout == .seconds(3))
        #expect(cluster.joinSettle == .seconds(2))
        #expect(cluster.handoverTimeout == .seconds(5))
        #expect(bridge.effectiveMQTTClientID == "pusher-mqtt-bridge-factory-node-1")
        #expect(bridge.effectiveStatusTopic == "pusher-mqtt-bridge/factory/status/node-1")
        #expect(
            bridge.effectiveStateDirectory(daemonStateDirectory: "/var/lib/pusher-mqtt-bridge/") == "/var/lib/pusher-mqtt-bridge/node-1")
    }

    @Test func withoutAClusterNothingIsDerived() throws {
        let bridge = try #require(try Fixture.parse(Fixture.config()).bridges.first)
        #expect(bridge.cluster == nil)
        #expect(bridge.effectiveMQTTClientID == bridge.mqtt.clientID)
        #expect(bridge.effectiveStatusTopic == bridge.mqtt.statusTopic)
        #expect(bridge.effectiveStateDirectory(daemonStateDirectory: "/s") == "/s")
    }

    @Test func everyKeyIsRead() throws {
        let text = Self.config(
            """
            group = "line_2"
            instance = "${HOST}"
            membership_topic = "plant/cluster"
            heartbeat_interval = "500ms"
            member_timeout = "2s"
            join_settle = "0s"
            mqtt_to_pusher = "partition"
            """, mqtt: "client_id = \"bridge\"\nstatus_topic = \"plant/status\"")
        let bridge = try #require(try Fixture.parse(text, environment: Fixture.environment(variables: ["HOST": "web-2"])).bridges.first)
        var expected = ClusterSettings(
            group: "line_2", instance: "web-2", membershipTopic: "plant/cluster", heartbeatInterval: .milliseconds(500),
            memberTimeout: .seconds(2), joinSettle: .zero)
        expected.mqttToPusher = .partition
        #expect(bridge.cluster == expected)
        #expect(bridge.effectiveMQTTClientID == "bridge-web-2")
        #expect(bridge.effectiveStatusTopic == "plant/status/web-2")
        #expect(bridge.cluster?.memberTopic("web-2") == "plant/cluster/members/web-2")
    }

    /// One bad `[bridge.cluster]` and exactly the lines `check` prints.
    struct Bad: Sendable, CustomTestStringConvertible {
        let name: String
        let cluster: String
        var mqtt = ""
        var variables: [String: String] = [:]
        let expected: [String]
        var testDescription: String { name }
    }

    static let file = "/etc/bridges.conf"
    static let bad: [Bad] = [
        Bad(
            name: "group missing", cluster: "instance = \"a\"",
            expected: ["\(file):12: error: bridge.factory.cluster.group: required key is missing"]),
        Bad(
            name: "group not a name", cluster: "group = \"Factory\"\ninstance = \"a\"",
            expected: [
                "\(file):13: error: bridge.factory.cluster.group: "
                    + "\"Factory\" is not a valid group name; use lower-case letters, digits, '_' and '-'"
            ]),
        Bad(
            name: "group not a string", cluster: "group = 5\ninstance = \"a\"",
            expected: ["\(file):13: error: bridge.factory.cluster.group: expected a string, found an integer"]),
        Bad(
            name: "group empty", cluster: "group = \"\"\ninstance = \"a\"",
            expected: ["\(file):13: error: bridge.factory.cluster.group: must not be empty"]),
        Bad(
            name: "group too long", cluster: "group = \"\(String(repeating: "g", count: 65))\"\ninstance = \"a\"",
            expected: ["\(file):13: error: bridge.factory.cluster.group: is longer than 64 bytes"]),
        Bad(
            name: "instance missing", cluster: "group = \"g\"",
            expected: ["\(file):12: error: bridge.factory.cluster.instance: required key is missing"]),
        Bad(
            name: "instance a full host name", cluster: "group = \"g\"\ninstance = \"${HOST}\"", variables: ["HOST": "web-1.example.com"],
            expected: [
                "\(file):14: error: bridge.factory.cluster.instance: "
                    + "\"web-1.example.com\" is not a valid instance name; use lower-case letters, "
                    + "digits, '_' and '-' (for a host name, use the short one: systemd's %l, not %H)"
            ]),
        Bad(
            name: "instance from an unset variable", cluster: "group = \"g\"\ninstance = \"${HOST}\"",
            expected: ["\(file):14: error: bridge.factory.cluster.instance: environment variable HOST is not set"]),
        Bad(
            name: "instance too long", cluster: "group = \"g\"\ninstance = \"\(String(repeating: "i", count: 65))\"",
            expected: ["\(file):14: error: bridge.factory.cluster.instance: is longer than 64 bytes"]),
        Bad(
            name: "membership_topic with a wildcard", cluster: minimal + "\nmembership_topic = \"a/+/b\"",
            expected: ["\(file):15: error: bridge.factory.cluster.membership_topic: topic contains a wildcard ('+' or '#')"]),
        Bad(
            name: "membership_topic reserved", cluster: minimal + "\nmembership_topic = \"$SYS/cluster\"",
            expected: ["\(file):15: error: bridge.factory.cluster.membership_topic: topics starting with '$' are reserved for the broker"]),
        Bad(
            name: "membership_topic ending in /", cluster: minimal + "\nmembership_topic = \"a/\"",
            expected: [
                "\(file):15: error: bridge.factory.cluster.membership_topic: "
                    + "must not end with '/' (the member topics are added as levels below it)"
            ]),
        Bad(
            name: "membership_topic empty", cluster: minimal + "\nmembership_topic = \"\"",
            expected: ["\(file):15: error: bridge.factory.cluster.membership_topic: must not be empty"]),
        Bad(
            name: "heartbeat_interval too short", cluster: minimal + "\nheartbeat_interval = \"50ms\"",
            expected: ["\(file):15: error: bridge.factory.cluster.heartbeat_interval: must be at least 0.1 seconds"]),
        Bad(
            name: "heartbeat_interval too long", cluster: minimal + "\nheartbeat_interval = \"2m\"\nmember_timeout = \"5m\"",
            expected: ["\(file):15: error: bridge.factory.cluster.heartbeat_interval: must be at most 60s"]),
        Bad(
            name: "heartbeat_interval not a duration", cluster: minimal + "\nheartbeat_interval = 1",
            expected: [
                "\(file):15: error: bridge.factory.cluster.heartbeat_interval: expected a duration string like \"30s\", found an integer"
            ]),
        Bad(
            name: "heartbeat_interval too long for the default member_timeout", cluster: minimal + "\nheartbeat_interval = \"2s\"",
            expected: [
                "\(file):15: error: bridge.factory.cluster.heartbeat_interval: "
                    + "with the default member_timeout of 3s, heartbeat_interval is at most 1500ms; set member_timeout too"
            ]),
        Bad(
            name: "member_timeout under two heartbeats", cluster: minimal + "\nmember_timeout = \"1500ms\"",
            expected: [
                "\(file):15: error: bridge.factory.cluster.member_timeout: "
                    + "must be at least twice heartbeat_interval (2s), so one late heartbeat does not make a live member dead"
            ]),
        Bad(
            name: "member_timeout zero", cluster: minimal + "\nmember_timeout = \"0s\"",
            expected: ["\(file):15: error: bridge.factory.cluster.member_timeout: must be greater than 0"]),
        Bad(
            name: "join_settle too long", cluster: minimal + "\njoin_settle = \"2m\"",
            expected: ["\(file):15: error: bridge.factory.cluster.join_settle: must be at most 60s"]),
        Bad(
            name: "join_settle not a duration", cluster: minimal + "\njoin_settle = \"soon\"",
            expected: [
                "\(file):15: error: bridge.factory.cluster.join_settle: "
                    + "\"soon\" is not a duration; write e.g. \"500ms\", \"30s\", \"2m\" or \"1h\""
            ]),
        Bad(
            name: "an unknown key", cluster: minimal + "\ninstnace = \"b\"",
            expected: ["\(file):15: error: bridge.factory.cluster.instnace: unknown key 'instnace' (did you mean 'instance'?)"]),
        Bad(
            name: "MQTT 3.1.1", cluster: minimal, mqtt: "protocol = 4",
            expected: [
                "\(file):11: error: bridge.factory.mqtt.protocol: "
                    + "a cluster ([bridge.cluster]) needs MQTT 5: its MQTT -> Pusher subscriptions are shared ($share/<group>/…) "
                    + "and its membership uses user properties; remove protocol = 4"
            ]),
        Bad(
            name: "mqtt_to_pusher unknown", cluster: minimal + "\nmqtt_to_pusher = \"partitioned\"",
            expected: [
                "\(file):15: error: bridge.factory.cluster.mqtt_to_pusher: "
                    + "\"partitioned\" is not one of \"shared\", \"partition\" (did you mean \"partition\"?)"
            ]),
        Bad(
            name: "mqtt_to_pusher not a string", cluster: minimal + "\nmqtt_to_pusher = 2",
            expected: ["\(file):15: error: bridge.factory.cluster.mqtt_to_pusher: expected a string, found an integer"]),
    ]

    @Test(arguments: bad)
    func badClusterSettings(_ bad: Bad) {
        let errors = Fixture.errors(Self.config(bad.cluster, mqtt: bad.mqtt), environment: Fixture.environment(variables: bad.variables))
        #expect(errors == bad.expected)
    }

    @Test func aClusterThatIsNotATable() {
        let text = Fixture.config().replacingOccurrences(of: "name = \"factory\"", with: "name = \"factory\"\ncluster = \"factory\"")
        #expect(Fixture.errors(text) == ["/etc/bridges.conf:3: error: bridge.factory.cluster: expected a table, found a string"])
    }

    @Test func checkShowsTheCluster() throws {
        let configuration = try Fixture.parse(Self.config(Self.minimal))
        let report = CheckReport.render(configuration, file: "bridges.conf")
        #expect(
            report.contains(
                "  cluster group factory, instance node-1: membership "
                    + "pusher-mqtt-bridge/cluster/factory/{members,heartbeat,held}/<instance>"
            ))
        #expect(report.contains("client_id pusher-mqtt-bridge-factory-node-1, status pusher-mqtt-bridge/factory/status/node-1"))
        #expect(report.contains("heartbeat 1s, member_timeout 3s, join_settle 2s, handover 5s"))
        #expect(!CheckReport.render(try Fixture.parse(Fixture.config()), file: "bridges.conf").contains("cluster group"))
    }

    @Test func aClusterChangeRestartsTheBridge() throws {
        let alone = try Fixture.parse(Self.config("").replacingOccurrences(of: "[bridge.cluster]", with: ""))
        let clustered = try Fixture.parse(Self.config(Self.minimal))
        let retimed = try Fixture.parse(Self.config(Self.minimal + "\njoin_settle = \"1s\""))
        #expect(ReloadPlan(old: alone, new: clustered).restarted.map(\.name) == ["factory"])
        #expect(ReloadPlan(old: clustered, new: alone).restarted.map(\.name) == ["factory"])
        #expect(ReloadPlan(old: clustered, new: retimed).restarted.map(\.name) == ["factory"])
        #expect(ReloadPlan(old: clustered, new: clustered).unchanged == ["factory"])
    }
}
