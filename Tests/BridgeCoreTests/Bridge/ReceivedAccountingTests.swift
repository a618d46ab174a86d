import TestSupport
import Testing

@testable import BridgeCore

/// `received_total` (docs/contract.md §7.6): every message that comes in is counted once per rule
/// that took it (once when none did), and each of those units ends in exactly one outcome — so
/// received = outcomes + what waits in the outbox + what a `throttle` holds.
@Suite("BridgeStateMachine: received = outcomes + buffered")
struct ReceivedAccountingTests {
    typealias Machine = BridgeStateMachine<TestInstant>
    typealias Action = Machine.Action

    static let rules = """
        [[bridge.rule]]
        name = "all-prices"
        from = "pusher"
        channel = "market"
        topic = "prices/{event}"

        [[bridge.rule]]
        name = "big-prices"
        from = "pusher"
        channel = "market"
        topic = "big/{json:/symbol}"
        where = "/p > 100"
        throttle = "1s"

        [[bridge.rule]]
        name = "sensors"
        from = "mqtt"
        topic = "sensors/+"
        channel = "sensor-{1}"
        event = "reading"
        on_change = true

        [[bridge.rule]]
        name = "rooms"
        from = "mqtt"
        topic = "sensors/+"
        channel = "room-{json:/room}"
        event = "reading"
        where = "exists /t"

        [[bridge.presence]]
        channel = "presence-ops"
        topic = "ops"
        """

    let t0 = TestInstant.at(milliseconds: 0)

    static func machine(deadLetterTopic: Bool = true) throws -> Machine {
        let mqtt = deadLetterTopic ? #"dead_letter_topic = "bridge/dead""# : ""
        return Machine(settings: try #require(Fixture.parse(Fixture.config(mqtt: mqtt, extra: rules)).bridges.first))
    }

    /// The books of one direction after a sequence of actions.
    struct Books: Equatable {
        var received = 0
        var outcomes = 0
        var enqueued = 0
    }

    static func books(_ actions: [Action]) -> [MessageDirection: Books] {
        var books: [MessageDirection: Books] = [.pusherToMQTT: Books(), .mqttToPusher: Books()]
        for action in actions {
            switch action {
            case .received(let direction, let count): books[direction]!.received += count
            case .count(_, let direction, _, let count): books[direction]!.outcomes += count
            case .enqueueToMQTT: books[.pusherToMQTT]!.enqueued += 1
            case .enqueueToPusher: books[.mqttToPusher]!.enqueued += 1
            default: break
            }
        }
        return books
    }

    @Test func aMessageTakenByTwoRulesCountsTwice() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.pusherEventReceived(
            channel: "market", event: "tick", data: #"{"symbol":"ACME","p":150}"#, userID: nil, receivedAt: Fixture.time, now: t0,
            into: &actions)
        #expect(actions.first == .received(.pusherToMQTT, by: 2))
        let books = Self.books(actions)[.pusherToMQTT]!
        // One published now, one held by the throttle.
        #expect(books.enqueued == 1)
        #expect(machine.heldMessages(.pusherToMQTT) == 1)
    }

    @Test func unmatchedEchoAndRetainedEachCount() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.mqttMessageReceived(
            topic: "elsewhere", payload: [1], qos: 1, retain: false, receivedAt: Fixture.time, now: t0, into: &actions)
        #expect(actions == [.received(.mqttToPusher, by: 1), .count(rule: "", direction: .mqttToPusher, outcome: .unmatched, by: 1)])
        actions = []
        machine.mqttMessageReceived(
            topic: "sensors/a", payload: Array(#"{"t":1,"room":"x"}"#.utf8), qos: 1, retain: true, receivedAt: Fixture.time, now: t0,
            into: &actions)
        // Both rules skip a retained message: two units, two `suppressed`.
        #expect(actions.first == .received(.mqttToPusher, by: 2))
        #expect(Self.books(actions)[.mqttToPusher]!.outcomes == 2)
    }

    @Test func aDeadLetterPublishedToTheBrokerIsANewPusherToMQTTMessage() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.mqttMessageReceived(
            topic: "sensors/a", payload: Array(#"{"t":1,"room":"no room!"}"#.utf8), qos: 1, retain: false, receivedAt: Fixture.time,
            now: t0, into: &actions)
        let books = Self.books(actions)
        #expect(books[.mqttToPusher] == Books(received: 2, outcomes: 1, enqueued: 1))  // sensors: sent; rooms: dead letter
        #expect(books[.pusherToMQTT] == Books(received: 1, outcomes: 0, enqueued: 1))  // the dead letter itself
    }

    @Test func presencePublishesAreCountedAsTheyAreMade() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.presenceSubscribed(
            channel: "presence-ops", members: [PresenceMember(userID: "u1", infoJSON: "{}")], receivedAtMillis: 0, into: &actions)
        let books = Self.books(actions)[.pusherToMQTT]!
        #expect(books.received == books.enqueued)
        #expect(books.received > 0)
    }

    /// A seeded random mix of events and messages: after each step, received = outcomes + what
    /// went to an outbox + what the throttle holds, per direction.
    @Test func theBooksBalanceAfterEveryStep() throws {
        var machine = try Self.machine()
        var generator = SplitMix64(seed: 14)
        var totals: [MessageDirection: Books] = [.pusherToMQTT: Books(), .mqttToPusher: Books()]
        for step in 0..<3000 {
            let now = t0.advanced(by: .milliseconds(Int64(step * 7)))
            var actions: [Action] = []
            if let deadline = machine.nextShapingDeadline, deadline <= now { machine.shapingTimerFired(now: now, into: &actions) }
            switch generator.next() % 4 {
            case 0:
                let p = generator.next() % 200
                let symbol = ["A", "B", "C", "bad/#"][Int(generator.next() % 4)]
                machine.pusherEventReceived(
                    channel: ["market", "other"][Int(generator.next() % 2)], event: "tick", data: #"{"symbol":"\#(symbol)","p":\#(p)}"#,
                    userID: nil, receivedAt: Fixture.time, now: now, into: &actions)
            case 1:
                let payload = [
                    #"{"t":1,"room":"r1"}"#, #"{"t":2,"room":"r2"}"#, #"{"room":"r1"}"#, "not json", #"{"t":1,"room":"bad room"}"#,
                ]
                machine.mqttMessageReceived(
                    topic: "sensors/\(generator.next() % 3)", payload: Array(payload[Int(generator.next() % 5)].utf8), qos: 1,
                    retain: generator.next() % 10 == 0, receivedAt: Fixture.time, now: now, into: &actions)
            case 2:
                machine.mqttMessageReceived(
                    topic: "elsewhere/\(step)", payload: [1], qos: 0, retain: false, receivedAt: Fixture.time, now: now, into: &actions)
            default:
                machine.presenceMemberAdded(
                    channel: "presence-ops", member: PresenceMember(userID: "u\(generator.next() % 5)", infoJSON: "{}"),
                    receivedAtMillis: 0, into: &actions)
            }
            for (direction, books) in Self.books(actions) {
                totals[direction]!.received += books.received
                totals[direction]!.outcomes += books.outcomes
                totals[direction]!.enqueued += books.enqueued
            }
            for direction in [MessageDirection.pusherToMQTT, .mqttToPusher] {
                let books = totals[direction]!
                #expect(
                    books.received == books.outcomes + books.enqueued + machine.heldMessages(direction),
                    "step \(step) \(direction): \(books), held \(machine.heldMessages(direction))")
            }
        }
        #expect(totals[.pusherToMQTT]!.received > 1000)
        #expect(totals[.mqttToPusher]!.received > 1000)
    }
}
