import TestSupport
import Testing

@testable import BridgeCore

/// `throttle` and `on_change` as the bridge's machine applies them (docs/contract.md §7.3), with a
/// manual clock: what goes to the outbox, when, and what is counted.
@Suite("Payload rules: rate shaping in the bridge machine")
struct ShapingMachineTests {
    typealias Machine = BridgeStateMachine<TestInstant>
    typealias Action = Machine.Action

    static let rules = """
        [[bridge.rule]]
        name = "sensors"
        from = "mqtt"
        topic = "sensors/+"
        channel = "sensor-{1}"
        event = "reading"
        throttle = "1s"

        [[bridge.rule]]
        name = "status"
        from = "mqtt"
        topic = "status/+"
        channel = "status"
        event = "{1}"
        on_change = true

        [[bridge.rule]]
        name = "prices"
        from = "pusher"
        channel = "market"
        topic = "prices/{json:/symbol}"
        throttle = "500ms"
        on_change = true
        """

    let t0 = TestInstant.at(milliseconds: 0)

    static func machine(_ rules: String = rules) throws -> Machine {
        Machine(settings: try #require(Fixture.parse(Fixture.config(extra: rules)).bridges.first))
    }

    func received(_ machine: inout Machine, _ topic: String, _ payload: String, at now: TestInstant) -> [Action] {
        var actions: [Action] = []
        machine.mqttMessageReceived(
            topic: topic, payload: Array(payload.utf8), qos: 1, retain: false, receivedAt: Fixture.time, now: now, into: &actions)
        return actions
    }

    func toPusher(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .enqueueToPusher(let event, _) = $0 { event.data } else { nil } }
    }

    func counted(_ actions: [Action], _ outcome: MessageOutcome) -> Int {
        actions.reduce(0) { total, action in
            if case .count(_, _, let counted, let by) = action, counted == outcome { return total + by }
            return total
        }
    }

    @Test func aFiftyHertzBurstBecomesTheLatestMessageOfEachSecond() throws {
        var machine = try Self.machine()
        var sent: [String] = []
        var coalesced = 0
        for i in 0..<150 {
            let now = t0.advanced(by: .milliseconds(20 * i))
            // The runtime's timer fires at each deadline before later messages are taken.
            if let deadline = machine.nextShapingDeadline, deadline <= now {
                var actions: [Action] = []
                machine.shapingTimerFired(now: deadline, into: &actions)
                sent += toPusher(actions)
            }
            let actions = received(&machine, "sensors/kitchen", "\(i)", at: now)
            sent += toPusher(actions)
            coalesced += counted(actions, .coalesced)
            if i == 0 { #expect(actions.contains(.shapingHeld)) }
        }
        var actions: [Action] = []
        machine.shapingTimerFired(now: try #require(machine.nextShapingDeadline), into: &actions)
        sent += toPusher(actions)
        // Intervals [0,1000), [1000,2000), [2000,3000) of arrival: the last message of each.
        #expect(sent == ["49", "99", "149"])
        #expect(coalesced == 147)
        #expect(machine.nextShapingDeadline == nil)
        #expect(machine.shapingTargetCounts == ["sensors": 1, "status": 0, "prices": 0])
    }

    @Test func targetsAreThrottledIndependently() throws {
        var machine = try Self.machine()
        _ = received(&machine, "sensors/a", "a1", at: t0)
        _ = received(&machine, "sensors/b", "b1", at: t0.advanced(by: .milliseconds(300)))
        var actions: [Action] = []
        machine.shapingTimerFired(now: t0.advanced(by: .seconds(1)), into: &actions)
        #expect(toPusher(actions) == ["a1"])
        actions = []
        machine.shapingTimerFired(now: t0.advanced(by: .milliseconds(1300)), into: &actions)
        #expect(toPusher(actions) == ["b1"])
    }

    @Test func onChangeDropsRepeatsPerTarget() throws {
        var machine = try Self.machine()
        var delivered: [String] = []
        var unchanged = 0
        for (i, (topic, payload)) in [
            ("status/line1", "ok"), ("status/line1", "ok"), ("status/line2", "ok"), ("status/line1", "fault"), ("status/line1", "fault"),
            ("status/line1", "ok"),
        ].enumerated() {
            let actions = received(&machine, topic, payload, at: t0.advanced(by: .milliseconds(i)))
            delivered += toPusher(actions)
            unchanged += counted(actions, .unchanged)
        }
        #expect(delivered == ["ok", "ok", "fault", "ok"])
        #expect(unchanged == 2)
    }

    @Test func throttleWithOnChangeComparesAtRelease() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        func event(_ data: String, _ ms: Int64) {
            machine.pusherEventReceived(
                channel: "market", event: "tick", data: data, userID: nil, receivedAt: Fixture.time,
                now: t0.advanced(by: .milliseconds(ms)),
                into: &actions)
        }
        func published() -> [String] {
            actions.compactMap { if case .enqueueToMQTT(let p, _) = $0 { String(decoding: p.payload, as: UTF8.self) } else { nil } }
        }
        event(#"{"symbol":"ACME","p":1}"#, 0)
        event(#"{"symbol":"ACME","p":2}"#, 100)
        machine.shapingTimerFired(now: t0.advanced(by: .milliseconds(500)), into: &actions)
        #expect(published() == [#"{"symbol":"ACME","p":2}"#])
        event(#"{"symbol":"ACME","p":3}"#, 600)
        event(#"{"symbol":"ACME","p":2}"#, 700)  // the latest equals what was sent last
        machine.shapingTimerFired(now: t0.advanced(by: .milliseconds(1100)), into: &actions)
        #expect(published() == [#"{"symbol":"ACME","p":2}"#])
        #expect(counted(actions, .unchanged) == 1)
        #expect(counted(actions, .coalesced) == 2)
    }

    @Test func stoppingReleasesWhatIsHeld() throws {
        var machine = try Self.machine()
        _ = received(&machine, "sensors/a", "a1", at: t0)
        var actions: [Action] = []
        machine.releaseAllShaped(now: t0.advanced(by: .milliseconds(10)), into: &actions)
        #expect(toPusher(actions) == ["a1"])
    }

    @Test func aReloadKeepsUnchangedShapersAndReleasesTheOthers() throws {
        var machine = try Self.machine()
        _ = received(&machine, "sensors/a", "a1", at: t0)
        var ignored: [Action] = []
        machine.pusherEventReceived(
            channel: "market", event: "tick", data: #"{"symbol":"X"}"#, userID: nil, receivedAt: Fixture.time, now: t0, into: &ignored)
        let changed = Self.rules.replacingOccurrences(of: #"throttle = "500ms""#, with: #"throttle = "2s""#)
        let new = try #require(Fixture.parse(Fixture.config(extra: changed)).bridges.first)
        let actions = machine.rulesReplaced(by: new, receivedAtMillis: 0, now: t0.advanced(by: .milliseconds(100)))
        let released = actions.compactMap { if case .enqueueToMQTT(let p, _) = $0 { p.topic } else { nil } }
        #expect(released == ["prices/X"])  // "prices" changed: released at once
        #expect(machine.nextShapingDeadline == t0.advanced(by: .seconds(1)))  // "sensors" kept its held message
    }

    @Test func aNewTargetBeyondTheCapIsSentUnshapedAndCounted() throws {
        var machine = try Self.machine(
            """
            [[bridge.rule]]
            name = "capped"
            from = "mqtt"
            topic = "sensors/+"
            channel = "sensor-{1}"
            event = "reading"
            throttle = "1s"
            max_targets = 2
            """)
        _ = received(&machine, "sensors/a", "1", at: t0)
        _ = received(&machine, "sensors/b", "1", at: t0)
        let actions = received(&machine, "sensors/c", "1", at: t0)
        #expect(toPusher(actions) == ["1"])
        #expect(actions.contains(.shapingTargetsFull(rule: "capped", direction: .mqttToPusher)))
    }
}
