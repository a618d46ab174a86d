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
}
