import Testing

@testable import BridgeCore

/// `[bridge.pusher] api_lanes` (docs/contract.md §5.2): how many MQTT → Pusher requests a bridge
/// keeps in flight.
@Suite struct APILanesConfigTests {
    @Test func defaultsToEightAndTakesOneToSixtyFour() throws {
        #expect(try Fixture.parse(Fixture.config()).bridges[0].pusher.apiLanes == 8)
        #expect(try Fixture.parse(Fixture.config(pusher: "api_lanes = 1")).bridges[0].pusher.apiLanes == 1)
        #expect(try Fixture.parse(Fixture.config(pusher: "api_lanes = 64")).bridges[0].pusher.apiLanes == 64)
    }

    /// Fixture.config puts the `pusher` text on line 11.
    @Test(arguments: [
        ("api_lanes = 0", "0 is out of range; must be 1…64"),
        ("api_lanes = 65", "65 is out of range; must be 1…64"),
        ("api_lanes = -3", "-3 is out of range; must be 1…64"),
        ("api_lanes = \"8\"", "expected an integer, found a string"),
        ("api_lanes = 8.5", "expected an integer, found a floating-point number"),
        ("api_lane = 8", "unknown key 'api_lane' (did you mean 'api_lanes'?)"),
    ])
    func badValuesAreReportedAtTheirLine(_ line: String, _ message: String) {
        let key = line.prefix { $0 != " " }
        #expect(Fixture.errors(Fixture.config(pusher: line)) == ["/etc/bridges.conf:11: error: bridge.factory.pusher.\(key): \(message)"])
    }

    @Test func checkPrintsIt() throws {
        let report = CheckReport.render(try Fixture.parse(Fixture.config(pusher: "api_lanes = 32")), file: "bridges.conf")
        #expect(report.contains(", max_event_bytes 10240, api_lanes 32\n"))
    }

    /// A connection-level setting: a reload that changes it restarts the bridge.
    @Test func aChangeRestartsTheBridge() throws {
        let old = try Fixture.parse(Fixture.config())
        let new = try Fixture.parse(Fixture.config(pusher: "api_lanes = 16"))
        let plan = ReloadPlan(old: old, new: new)
        #expect(plan.restarted.map(\.name) == ["factory"])
        #expect(plan.rulesChanged.isEmpty && plan.unchanged.isEmpty)
        #expect(ReloadPlan(old: new, new: new).unchanged == ["factory"])
    }
}
