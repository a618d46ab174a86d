import Testing

@testable import BridgeCore

/// `[daemon] webhooks` and `[bridge.webhooks]` (docs/contract.md §7.2): defaults, bad input, `check`, reload.
@Suite struct WebhookConfigTests {
    static func config(daemon: String = "webhooks = \"127.0.0.1:9465\"", webhooks: String, pusher: String = "") -> String {
        "[daemon]\n\(daemon)\n" + Fixture.config(pusher: pusher, extra: "[bridge.webhooks]\n\(webhooks)\n")
    }

    @Test func defaultsAreOffAndAllSevenEventsAtQoS1() throws {
        let plain = try Fixture.parse(Fixture.config())
        #expect(plain.daemon.webhooks == nil)
        #expect(plain.bridges[0].webhooks == nil)
        let configured = try Fixture.parse(Self.config(webhooks: "topic_prefix = \"pusher/factory\""))
        #expect(configured.daemon.webhooks == ListenAddress(host: "127.0.0.1", port: 9465))
        let webhooks = try #require(configured.bridges[0].webhooks)
        #expect(webhooks.topicPrefix == "pusher/factory")
        #expect(webhooks.events == Set(PusherWebhookKind.allCases))
        #expect(webhooks.events.count == 7)
        #expect(webhooks.qos == 1)
    }

    @Test func eventsAndQoSAreRead() throws {
        let configured = try Fixture.parse(
            Self.config(webhooks: "topic_prefix = \"p\"\nevents = [\"member_added\", \"member_removed\"]\nqos = 0"))
        #expect(configured.bridges[0].webhooks == BridgeWebhookSettings(topicPrefix: "p", events: [.memberAdded, .memberRemoved], qos: 0))
    }

    @Test func emptyListenerIsOff() throws {
        let configured = try Fixture.parse("[daemon]\nwebhooks = \"\"\n" + Fixture.config())
        #expect(configured.daemon.webhooks == nil)
    }

    @Test(arguments: [
        (
            "unknown event name",
            config(webhooks: "topic_prefix = \"p\"\nevents = [\"member_added\", \"channel_exploded\"]"),
            "/etc/bridges.conf:21: error: bridge.factory.webhooks.events: unknown webhook event \"channel_exploded\"; expected some of "
                + "channel_occupied, channel_vacated, member_added, member_removed, client_event, cache_miss, subscription_count"
        ),
        (
            "empty events", config(webhooks: "topic_prefix = \"p\"\nevents = []"),
            "/etc/bridges.conf:21: error: bridge.factory.webhooks.events: lists no event; "
                + "leave the key out for all seven, or remove [bridge.webhooks]"
        ),
        (
            "bad qos", config(webhooks: "topic_prefix = \"p\"\nqos = 3"),
            "/etc/bridges.conf:21: error: bridge.factory.webhooks.qos: QoS must be 0, 1 or 2, found 3"
        ),
        (
            "topic_prefix with a wildcard", config(webhooks: "topic_prefix = \"pusher/+\""),
            "/etc/bridges.conf:20: error: bridge.factory.webhooks.topic_prefix: topic contains a wildcard ('+' or '#')"
        ),
        (
            "topic_prefix with a trailing slash", config(webhooks: "topic_prefix = \"pusher/\""),
            "/etc/bridges.conf:20: error: bridge.factory.webhooks.topic_prefix: must not end with '/'"
        ),
        (
            "topic_prefix with a placeholder", config(webhooks: "topic_prefix = \"pusher/{bridge}\""),
            "/etc/bridges.conf:20: error: bridge.factory.webhooks.topic_prefix: takes no placeholders; "
                + "webhooks go to pusher/{bridge}/channels/<channel>/…"
        ),
        (
            "section without topic_prefix", config(webhooks: "qos = 1"),
            "/etc/bridges.conf:19: error: bridge.factory.webhooks.topic_prefix: required key is missing"
        ),
        (
            "unknown key", config(webhooks: "topic_prefix = \"p\"\ntopic = \"x\""),
            "/etc/bridges.conf:21: error: bridge.factory.webhooks.topic: unknown key 'topic'"
        ),
        (
            "bad listen address", config(daemon: "webhooks = \"localhost\"", webhooks: "topic_prefix = \"p\""),
            "/etc/bridges.conf:2: error: daemon.webhooks: expected \"host:port\" with a port 1…65535, "
                + "or \"\" to turn the webhook listener off; found \"localhost\""
        ),
        (
            "listener off while a bridge has webhooks", config(daemon: "", webhooks: "topic_prefix = \"p\""),
            "/etc/bridges.conf:19: error: bridge.factory.webhooks: webhooks are enabled for this bridge "
                + "but the listener is off: set [daemon] webhooks = \"host:port\""
        ),
        (
            "listener explicitly off while a bridge has webhooks", config(daemon: "webhooks = \"\"", webhooks: "topic_prefix = \"p\""),
            "/etc/bridges.conf:19: error: bridge.factory.webhooks: webhooks are enabled for this bridge "
                + "but the listener is off: set [daemon] webhooks = \"host:port\""
        ),
    ])
    func badInput(_ name: String, _ text: String, _ expected: String) {
        let errors = Fixture.errors(text)
        #expect(errors.contains(expected), "\(name): \(errors)")
    }

    @Test func webhooksNeedTheSecret() {
        let text = Self.config(webhooks: "topic_prefix = \"p\"").replacingOccurrences(of: "secret = \"app-secret\"\n", with: "")
        let errors = Fixture.errors(text)
        #expect(
            errors.contains {
                $0.contains("bridge.factory.webhooks: webhooks need pusher.secret (or secret_file)")
            }, "\(errors)")
    }

    @Test func checkShowsTheListenerAndEachBridgesWebhooks() throws {
        let all = try Fixture.parse(Self.config(webhooks: "topic_prefix = \"pusher/factory\""))
        let report = CheckReport.render(all, file: "bridges.conf")
        #expect(report.contains(", webhooks 127.0.0.1:9465"))
        #expect(report.contains("  webhooks: POST /webhooks/factory -> pusher/factory/channels/{channel}/..., qos 1, events all"))
        let some = try Fixture.parse(Self.config(webhooks: "topic_prefix = \"p\"\nevents = [\"member_removed\", \"member_added\"]"))
        #expect(CheckReport.render(some, file: "b").contains("qos 1, events member_added,member_removed"))
        #expect(!CheckReport.render(try Fixture.parse(Fixture.config()), file: "b").contains("webhooks"))
    }

    @Test func changingBridgeWebhooksKeepsTheConnections() throws {
        let old = try Fixture.parse(Self.config(webhooks: "topic_prefix = \"a\""))
        let new = try Fixture.parse(Self.config(webhooks: "topic_prefix = \"b\"\nqos = 0"))
        let plan = ReloadPlan(old: old, new: new)
        #expect(plan.rulesChanged.map(\.name) == ["factory"])
        #expect(plan.restarted.isEmpty)
        #expect(!plan.daemonChanged)
        let moved = try Fixture.parse(Self.config(daemon: "webhooks = \"127.0.0.1:9466\"", webhooks: "topic_prefix = \"a\""))
        #expect(ReloadPlan(old: old, new: moved).daemonChanged)
    }
}
