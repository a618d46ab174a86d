import Testing

@testable import BridgeCore

@Suite struct ReloadPlanTests {
    static func config(_ text: String) throws -> BridgeConfiguration {
        try ConfigLoader.parse(
            text, file: "t.conf", environment: ConfigEnvironment(variables: [:], readFile: { _ in nil }, fileExists: { _ in true }))
    }

    static func bridge(_ name: String, port: Int = 1883, rule: String = "a") -> String {
        """
        [[bridge]]
        name = "\(name)"
        [bridge.pusher]
        key = "k"
        host = "127.0.0.1"
        port = 6001
        tls = false
        [bridge.mqtt]
        host = "127.0.0.1"
        port = \(port)
        [[bridge.rule]]
        name = "\(rule)"
        from = "pusher"
        channel = "c"
        topic = "t/\(rule)"

        """
    }

    @Test func splitsChangesByWhetherConnectionsCanStay() throws {
        let old = try Self.config(
            "[daemon]\nmetrics = \"\"\n" + Self.bridge("same") + Self.bridge("rules") + Self.bridge("conn") + Self.bridge("gone"))
        let new = try Self.config(
            "[daemon]\nmetrics = \"\"\n" + Self.bridge("same") + Self.bridge("rules", rule: "b") + Self.bridge("conn", port: 1884)
                + Self.bridge("new"))
        let plan = ReloadPlan(old: old, new: new)
        #expect(plan.unchanged == ["same"])
        #expect(plan.rulesChanged.map(\.name) == ["rules"])
        #expect(plan.restarted.map(\.name) == ["conn"])
        #expect(plan.added.map(\.name) == ["new"])
        #expect(plan.removed == ["gone"])
    }

    static func mqttRule(qos: Int, overflow: String? = nil) -> String {
        let signed = Self.bridge("b").replacingOccurrences(of: "key = \"k\"", with: "key = \"k\"\napp_id = \"1\"\nsecret = \"s\"")
        let buffer = overflow.map { "[bridge.buffer]\noverflow = \"\($0)\"\n" } ?? ""
        return signed + buffer
            + "[[bridge.rule]]\nname = \"m\"\nfrom = \"mqtt\"\ntopic = \"in/+\"\nchannel = \"c-{1}\"\nevent = \"e\"\nqos = \(qos)\n"
    }

    /// docs/contract.md §3, §7.6: without an `overflow` key the MQTT → Pusher policy follows the
    /// rules' QoS; a rules-only edit that moves it (QoS 0 → 1: drop-oldest → backpressure) keeps the
    /// connections, and the runtime changes the buffer's policy in place (issue 26: it used to
    /// restart the bridge, which dropped both connections and raced the spool's lock).
    @Test func aRuleChangeThatMovesTheDefaultOverflowPolicyKeepsTheConnections() throws {
        let qos0 = try Self.config(Self.mqttRule(qos: 0))
        let qos1 = try Self.config(Self.mqttRule(qos: 1))
        #expect(qos0.bridges[0].mqttToPusherOverflow == .dropOldest)
        #expect(qos1.bridges[0].mqttToPusherOverflow == .backpressure)
        let up = ReloadPlan(old: qos0, new: qos1)
        #expect(up.rulesChanged.map(\.name) == ["b"])
        #expect(up.rulesChanged.first?.mqttToPusherOverflow == .backpressure)
        #expect(up.restarted.isEmpty)
        #expect(ReloadPlan(old: qos1, new: qos0).rulesChanged.map(\.name) == ["b"])
        #expect(ReloadPlan(old: qos1, new: qos0).restarted.isEmpty)
        // With the policy set in the file, the same edit keeps the connections.
        let set0 = try Self.config(Self.mqttRule(qos: 0, overflow: "drop-newest"))
        let set1 = try Self.config(Self.mqttRule(qos: 1, overflow: "drop-newest"))
        let kept = ReloadPlan(old: set0, new: set1)
        #expect(kept.rulesChanged.map(\.name) == ["b"])
        #expect(kept.restarted.isEmpty)
    }

    /// docs/contract.md §8.1, "staggered reconnects": a change of `[bridge.pusher]` other than the
    /// connection count or the HTTP lanes replaces the Pusher connections in place (the MQTT
    /// connection stays), also with the rules changed at once; `connections` or `api_lanes`
    /// restart the bridge, and so does a Pusher change together with an MQTT one.
    @Test func aPusherChangeReplacesTheConnectionsInPlaceUnlessTheCountOrLanesChange() throws {
        let base = Self.bridge("b")
        let old = try Self.config(base)
        func plan(_ edited: String) throws -> ReloadPlan { ReloadPlan(old: old, new: try Self.config(edited)) }
        let key = try plan(base.replacingOccurrences(of: "key = \"k\"", with: "key = \"k2\""))
        #expect(key.pusherReplaced.map(\.name) == ["b"] && key.restarted.isEmpty && key.rulesChanged.isEmpty)
        let timeout = try plan(base.replacingOccurrences(of: "tls = false", with: "tls = false\nactivity_timeout = \"30s\""))
        #expect(timeout.pusherReplaced.map(\.name) == ["b"])
        let withRules = try plan(Self.bridge("b", rule: "z").replacingOccurrences(of: "key = \"k\"", with: "key = \"k2\""))
        #expect(withRules.pusherReplaced.map(\.name) == ["b"], "the rules are applied with it")
        for restarting in ["tls = false\nconnections = 2", "tls = false\napi_lanes = 2"] {
            let edited = try plan(base.replacingOccurrences(of: "tls = false", with: restarting))
            #expect(edited.restarted.map(\.name) == ["b"] && edited.pusherReplaced.isEmpty, "\(restarting)")
        }
        let both = try plan(Self.bridge("b", port: 1884).replacingOccurrences(of: "key = \"k\"", with: "key = \"k2\""))
        #expect(both.restarted.map(\.name) == ["b"] && both.pusherReplaced.isEmpty)
    }
}
