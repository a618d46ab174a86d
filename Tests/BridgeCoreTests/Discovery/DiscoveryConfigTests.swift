import Testing

@testable import BridgeCore

/// The base the bad configs below vary: lines 1–12.
private let head = """
    [[bridge]]
    name = "factory"
    [bridge.pusher]
    key = "app-key"
    app_id = "1"
    secret = "app-secret"
    host = "127.0.0.1"
    port = 6001
    tls = false
    [bridge.mqtt]
    host = "127.0.0.1"
    client_id = "factory-1"
    """

private let badDiscoveryConfigs: [BadConfig] = [
    BadConfig(
        name: "channel and channel_prefix together, discovery keys and {suffix} without a prefix",
        text: head + """

            [[bridge.rule]]
            name = "both"
            from = "pusher"
            channel = "private-device-1"
            channel_prefix = "private-device-"
            topic = "fleet/{event}"
            [[bridge.rule]]
            name = "keys"
            from = "pusher"
            channel = "orders"
            topic = "orders/{event}"
            discovery_interval = "30s"
            max_channels = 10
            idle_timeout = "1m"
            [[bridge.rule]]
            name = "suffix"
            from = "pusher"
            channel = "orders"
            topic = "orders/{suffix}"
            [[bridge.rule]]
            name = "mqtt"
            from = "mqtt"
            topic = "a/+"
            channel = "c"
            event = "e"
            channel_prefix = "x-"
            """,
        expected: [
            "/etc/bridges.conf:17: error: bridge.factory.rule.both.channel_prefix: give either channel or channel_prefix, not both",
            "/etc/bridges.conf:24: error: bridge.factory.rule.keys.discovery_interval: only applies with channel_prefix",
            "/etc/bridges.conf:25: error: bridge.factory.rule.keys.max_channels: only applies with channel_prefix",
            "/etc/bridges.conf:26: error: bridge.factory.rule.keys.idle_timeout: only applies with channel_prefix",
            "/etc/bridges.conf:31: error: bridge.factory.rule.suffix.topic: {suffix} needs channel_prefix: it is the channel name after the prefix",
            "/etc/bridges.conf:38: error: bridge.factory.rule.mqtt.channel_prefix: 'channel_prefix' only applies to rules with from = \"pusher\"",
        ]),
    BadConfig(
        name: "discovery values out of range, prefixes that are no channel-name start",
        text: head + """

            [[bridge.rule]]
            name = "fast"
            from = "pusher"
            channel_prefix = "private-device-"
            topic = "fleet/{suffix}"
            discovery_interval = "1s"
            max_channels = 0
            idle_timeout = "soon"
            [[bridge.rule]]
            name = "chars"
            from = "pusher"
            channel_prefix = "device/"
            topic = "fleet/{suffix}"
            [[bridge.rule]]
            name = "kind"
            from = "pusher"
            channel_prefix = "priv"
            topic = "fleet/{suffix}"
            [[bridge.rule]]
            name = "types"
            from = "pusher"
            channel_prefix = 7
            topic = "fleet/{suffix}"
            max_channels = "many"
            discovery_interval = 30
            [[bridge.rule]]
            name = "empty"
            from = "pusher"
            channel_prefix = ""
            topic = "fleet/{suffix}"
            """,
        expected: [
            "/etc/bridges.conf:18: error: bridge.factory.rule.fast.discovery_interval: must be at least 5.0 seconds",
            "/etc/bridges.conf:19: error: bridge.factory.rule.fast.max_channels: 0 is out of range; must be 1…1000000",
            "/etc/bridges.conf:20: error: bridge.factory.rule.fast.idle_timeout: \"soon\" is not a duration; write e.g. \"500ms\", \"30s\", \"2m\" or \"1h\"",
            "/etc/bridges.conf:24: error: bridge.factory.rule.chars.channel_prefix: '/' can never appear in a channel name; allowed are A-Z a-z 0-9 _ - = @ , . ;",
            "/etc/bridges.conf:29: error: bridge.factory.rule.kind.channel_prefix: \"priv\" would take channels of different kinds; write out at least \"private-\"",
            "/etc/bridges.conf:34: error: bridge.factory.rule.types.channel_prefix: expected a string, found an integer",
            "/etc/bridges.conf:36: error: bridge.factory.rule.types.max_channels: expected an integer, found a string",
            "/etc/bridges.conf:37: error: bridge.factory.rule.types.discovery_interval: expected a duration string like \"30s\", found an integer",
            "/etc/bridges.conf:41: error: bridge.factory.rule.empty.channel_prefix: must not be empty",
        ]),
    BadConfig(
        name: "presence mirrors with a prefix",
        text: head + """

            [[bridge.presence]]
            channel_prefix = "private-room-"
            topic = "dash/rooms/{suffix}"
            [[bridge.presence]]
            channel_prefix = "presence-room-"
            topic = "dash/rooms/x{suffix}"
            [[bridge.presence]]
            channel_prefix = "presence-hall-"
            topic = "dash/halls"
            [[bridge.presence]]
            channel = "presence-lobby"
            topic = "dash/lobby/{suffix}"
            idle_timeout = "5m"
            [[bridge.presence]]
            channel_prefix = "presence-room-"
            topic = "dash/other/{suffix}"
            [[bridge.presence]]
            channel_prefix = "presence-room-"
            topic = "dash/third/{suffix}"
            max_channels = 5
            """,
        expected: [
            "/etc/bridges.conf:14: error: bridge.factory.presence[1].channel_prefix: \"private-room-\" does not start with \"presence-\"; presence mirrors take presence channels only",
            "/etc/bridges.conf:18: error: bridge.factory.presence[2].topic: a presence mirror with channel_prefix needs {suffix} once, as a whole topic level (e.g. \"dash/rooms/{suffix}\"), and no other placeholder",
            "/etc/bridges.conf:21: error: bridge.factory.presence[3].topic: a presence mirror with channel_prefix needs {suffix} once, as a whole topic level (e.g. \"dash/rooms/{suffix}\"), and no other placeholder",
            "/etc/bridges.conf:24: error: bridge.factory.presence[4].topic: presence topics take no placeholders ({suffix} needs channel_prefix); members go to dash/lobby/{suffix}/members/<user_id>",
            "/etc/bridges.conf:25: error: bridge.factory.presence[4].idle_timeout: only applies with channel_prefix",
            "/etc/bridges.conf:30: error: bridge.factory.presence[6].channel_prefix: channel_prefix \"presence-room-\" is already mirrored by another [[bridge.presence]]",
        ]),
    BadConfig(
        name: "channel_prefix without app_id and secret",
        text: """
            [[bridge]]
            name = "open"
            [bridge.pusher]
            key = "k"
            host = "127.0.0.1"
            port = 6001
            tls = false
            [bridge.mqtt]
            host = "127.0.0.1"
            [[bridge.rule]]
            name = "devices"
            from = "pusher"
            channel_prefix = "device-"
            topic = "fleet/{suffix}"
            [[bridge.presence]]
            channel_prefix = "presence-room-"
            topic = "dash/rooms/{suffix}"
            """,
        expected: [
            "/etc/bridges.conf:13: error: bridge.open.rule.devices.channel_prefix: finds channels through the HTTP API, which needs pusher.app_id",
            "/etc/bridges.conf:13: error: bridge.open.rule.devices.channel_prefix: finds channels through the HTTP API, which needs pusher.secret (or secret_file) to sign requests",
            "/etc/bridges.conf:16: error: bridge.open.presence[1].channel_prefix: channel \"presence-room-\" needs authorization: set pusher.secret (or secret_file) or pusher.auth_endpoint",
            "/etc/bridges.conf:16: error: bridge.open.presence[1].channel_prefix: finds channels through the HTTP API, which needs pusher.app_id",
            "/etc/bridges.conf:16: error: bridge.open.presence[1].channel_prefix: finds channels through the HTTP API, which needs pusher.secret (or secret_file) to sign requests",
        ]),
]

/// `channel_prefix`, `{suffix}`, `discovery_interval`, `max_channels`, `idle_timeout` (docs/contract.md §7.1).
@Suite struct DiscoveryConfigTests {
    @Test(arguments: badDiscoveryConfigs)
    func reportsExactly(_ bad: BadConfig) {
        let errors = Fixture.errors(bad.text, environment: Fixture.environment(variables: bad.variables, files: bad.files))
        #expect(errors == bad.expected)
    }

    @Test func aPrefixLongerThanAnyChannelNameIsRefused() {
        let prefix = String(repeating: "a", count: 164)
        let errors = Fixture.errors(
            Fixture.config(
                extra: "[[bridge.rule]]\nname = \"r\"\nfrom = \"pusher\"\nchannel_prefix = \"\(prefix)\"\ntopic = \"t/{suffix}\""))
        #expect(errors.count == 1)
        #expect(
            errors.first?.hasSuffix("channel_prefix: is 164 characters; channel names have at most 164, so nothing could follow it") == true
        )
    }

    @Test func readsPrefixRulesWithDefaultsAndExplicitKeys() throws {
        let configuration = try Fixture.parse(
            Fixture.config(
                extra: """
                    [[bridge.rule]]
                    name = "devices"
                    from = "pusher"
                    channel_prefix = "private-device-"
                    events = ["reading"]
                    topic = "fleet/{suffix}/{event}"
                    [[bridge.rule]]
                    name = "tuned"
                    from = "pusher"
                    channel_prefix = "private-"
                    topic = "all/{channel}"
                    discovery_interval = "5s"
                    max_channels = 7
                    idle_timeout = "90s"
                    [[bridge.presence]]
                    channel_prefix = "presence-room-"
                    topic = "dash/rooms/{suffix}"
                    qos = 0
                    """))
        let bridge = try #require(configuration.bridges.first)
        let rules = bridge.pusherToMQTTRules
        #expect(rules[0].channelPrefix == "private-device-")
        #expect(rules[0].discovery == ChannelDiscoverySettings())
        #expect(rules[0].discovery?.interval == .seconds(30))
        #expect(rules[0].discovery?.maxChannels == 1000)
        #expect(rules[0].discovery?.idleTimeout == .seconds(600))
        #expect(rules[1].discovery == ChannelDiscoverySettings(interval: .seconds(5), maxChannels: 7, idleTimeout: .seconds(90)))
        #expect(rules[0].takes(channel: "private-device-1"))
        #expect(!rules[0].takes(channel: "private-device-"))
        #expect(!rules[0].takes(channel: "private-devic"))
        let mirror = try #require(bridge.presence.first)
        #expect(mirror.channelPrefix == "presence-room-")
        #expect(mirror.retainedMembersFilter == "dash/rooms/+/members/+")
        #expect(mirror.room("presence-room-a.b") == PresenceMirrorRule(channel: "presence-room-a.b", topic: "dash/rooms/a.b", qos: 0))
        #expect(mirror.room("presence-hall-a") == nil)
        #expect(bridge.pusherChannels.isEmpty)
        #expect(bridge.mqttSubscriptions.map(\.filter) == ["dash/rooms/+/members/+"])
        #expect(bridge.mqttSubscriptions.first?.purposes == ["presence prefix presence-room-"])
    }

    @Test func changingPrefixRulesIsARulesOnlyReload() throws {
        func config(_ rule: String) throws -> BridgeConfiguration {
            try Fixture.parse(Fixture.config(extra: rule))
        }
        let exact = try config("[[bridge.rule]]\nname = \"d\"\nfrom = \"pusher\"\nchannel = \"c\"\ntopic = \"t\"")
        let prefix = try config("[[bridge.rule]]\nname = \"d\"\nfrom = \"pusher\"\nchannel_prefix = \"c-\"\ntopic = \"t/{suffix}\"")
        let tuned = try config(
            "[[bridge.rule]]\nname = \"d\"\nfrom = \"pusher\"\nchannel_prefix = \"c-\"\ntopic = \"t/{suffix}\"\nmax_channels = 5")
        let mirror = try config("[[bridge.presence]]\nchannel_prefix = \"presence-r-\"\ntopic = \"r/{suffix}\"")
        for (old, new) in [(exact, prefix), (prefix, tuned), (tuned, exact), (prefix, mirror), (mirror, exact)] {
            let plan = ReloadPlan(old: old, new: new)
            #expect(plan.rulesChanged.map(\.name) == ["factory"])
            #expect(plan.restarted.isEmpty)
        }
    }

    @Test func checkPrintsPrefixRules() throws {
        let configuration = try Fixture.parse(
            Fixture.config(
                extra: """
                    [[bridge.rule]]
                    name = "devices"
                    from = "pusher"
                    channel_prefix = "private-device-"
                    topic = "fleet/{suffix}"
                    [[bridge.presence]]
                    channel_prefix = "presence-room-"
                    topic = "dash/rooms/{suffix}"
                    idle_timeout = "1h"
                    """))
        let text = CheckReport.render(configuration, file: "/etc/bridges.conf")
        #expect(
            text.contains(
                "  discovery: rule devices polls channels under \"private-device-\" every 30s (info=subscription_count), holds at most 1000, "
                    + "leaves a channel without counts after 10m without events"))
        #expect(
            text.contains(
                "  discovery: presence mirror polls channels under \"presence-room-\" every 30s (info=user_count), holds at most 1000, "
                    + "leaves a channel without counts after 1h without events"))
        #expect(text.contains("channel_prefix private-device- events *"))
        #expect(text.contains("channel_prefix presence-room-"))
        #expect(text.contains("  pusher channels: none"))
    }

    @Test func routeNamesThePrefixRuleThatWouldTakeAChannel() throws {
        let configuration = try Fixture.parse(
            Fixture.config(
                extra: """
                    [[bridge.rule]]
                    name = "devices"
                    from = "pusher"
                    channel_prefix = "private-device-"
                    topic = "fleet/{suffix}/{event}"
                    [[bridge.rule]]
                    name = "exact"
                    from = "pusher"
                    channel = "orders"
                    topic = "orders"
                    [[bridge.presence]]
                    channel_prefix = "presence-room-"
                    topic = "dash/rooms/{suffix}"
                    """))
        let text = RouteExplanation.explain(
            channel: "private-device-042", event: "reading", data: "{}", in: configuration, receivedAt: Fixture.time)
        #expect(
            text.contains(
                "  discovery: rule devices takes this channel when it is occupied (channel_prefix \"private-device-\", {suffix} = \"042\")")
        )
        #expect(text.contains("  rule devices: MATCH -> mqtt topic \"fleet/042/reading\" qos 1"))
        #expect(text.contains("  rule exact: no match: listens on channel \"orders\""))
        let other = RouteExplanation.explain(channel: "orders", event: "x", data: "{}", in: configuration, receivedAt: Fixture.time)
        #expect(other.contains("  rule devices: no match: takes channels under channel_prefix \"private-device-\""))
        #expect(!other.contains("discovery:"))
        let room = RouteExplanation.explain(channel: "presence-room-7", event: "x", data: "{}", in: configuration, receivedAt: Fixture.time)
        #expect(
            room.contains(
                "  discovery: presence mirror presence:presence-room- takes this room when it is occupied: members become retained "
                    + "dash/rooms/7/members/<user_id> and dash/rooms/7/count"))
    }
}
