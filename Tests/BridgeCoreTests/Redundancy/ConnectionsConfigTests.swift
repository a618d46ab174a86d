import Testing

@testable import BridgeCore

/// `[bridge.pusher] connections` (docs/pusher-merge.md): how many redundant Pusher connections a
/// bridge holds its channels on.
@Suite struct ConnectionsConfigTests {
    @Test func defaultsToOneAndTakesOneToThree() throws {
        #expect(try Fixture.parse(Fixture.config()).bridges[0].pusher.connections == 1)
        for count in 1...3 {
            #expect(try Fixture.parse(Fixture.config(pusher: "connections = \(count)")).bridges[0].pusher.connections == count)
        }
    }

    /// Fixture.config puts the `pusher` text on line 11.
    @Test(arguments: [
        ("connections = 0", "0 is out of range; must be 1…3"),
        ("connections = 4", "4 is out of range; must be 1…3"),
        ("connections = -1", "-1 is out of range; must be 1…3"),
        ("connections = \"two\"", "expected an integer, found a string"),
        ("connections = 2.0", "expected an integer, found a floating-point number"),
        ("connection = 2", "unknown key 'connection' (did you mean 'connections'?)"),
    ])
    func badValuesAreReportedAtTheirLine(_ line: String, _ message: String) {
        let key = line.prefix { $0 != " " }
        #expect(Fixture.errors(Fixture.config(pusher: line)) == ["/etc/bridges.conf:11: error: bridge.factory.pusher.\(key): \(message)"])
    }

    @Test func checkPrintsTheCountAndWhatPusherCounts() throws {
        let one = CheckReport.render(try Fixture.parse(Fixture.config()), file: "bridges.conf")
        #expect(!one.contains("connections, events merged"))
        let two = CheckReport.render(try Fixture.parse(Fixture.config(pusher: "connections = 2")), file: "bridges.conf")
        #expect(two.contains("  pusher  2 connections, events merged: Pusher counts each Pusher → MQTT event 2× (2 messages per event)"))
    }

    /// The connection count: a reload that changes it restarts the bridge (other `[bridge.pusher]`
    /// changes replace the connections in place: ReloadPlanTests).
    @Test func aChangeRestartsTheBridge() throws {
        let old = try Fixture.parse(Fixture.config())
        let new = try Fixture.parse(Fixture.config(pusher: "connections = 2"))
        #expect(ReloadPlan(old: old, new: new).restarted.map(\.name) == ["factory"])
    }
}
