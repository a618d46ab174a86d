import MQTTVocabulary
import TestSupport
import Testing

@testable import BridgeCore

/// The bridge's decisions, driven by event sequences with a manual clock: no sockets, no sleeps.
@Suite("BridgeStateMachine: the bridge's decisions")
struct BridgeStateMachineTests {
    typealias Machine = BridgeStateMachine<TestInstant>
    typealias Action = Machine.Action

    static let rules = """
        [[bridge.rule]]
        name = "prices"
        from = "pusher"
        channel = "market-data"
        events = ["new-price"]
        topic = "dash/prices/{event}"
        qos = 1

        [[bridge.rule]]
        name = "temperatures"
        from = "mqtt"
        topic = "sensors/+/temperature"
        channel = "sensor-{1}"
        event = "temperature"

        [[bridge.rule]]
        name = "bad-channel"
        from = "mqtt"
        topic = "raw/+"
        channel = "{1}"
        event = "raw"

        [[bridge.presence]]
        channel = "presence-lobby"
        topic = "lobby"
        """

    static func settings(mqtt: String = "", extra: String = rules) throws -> BridgeSettings {
        try #require(Fixture.parse(Fixture.config(mqtt: mqtt, extra: extra)).bridges.first)
    }

    static func machine(mqtt: String = "dead_letter_topic = \"bridge/dead\"", extra: String = rules) throws -> Machine {
        Machine(settings: try settings(mqtt: mqtt, extra: extra))
    }

    let t0 = TestInstant.at(milliseconds: 0)

    /// The actions without `.received`: these tests check routing; `received_total` has its own
    /// suite (ReceivedAccountingTests).
    static func withoutReceivedCounts(_ actions: [Action]) -> [Action] {
        actions.filter { if case .received = $0 { false } else { true } }
    }
    let millis = Fixture.time.millisecondsSince1970

    func received(_ machine: inout Machine, topic: String, payload: String, qos: Int = 1, at now: TestInstant) -> [Action] {
        var actions: [Action] = []
        machine.mqttMessageReceived(
            topic: topic, payload: Array(payload.utf8), qos: qos, retain: false, receivedAt: Fixture.time, now: now, into: &actions)
        return Self.withoutReceivedCounts(actions)
    }

    func event(_ machine: inout Machine, channel: String, event: String, data: String = "{}", at now: TestInstant) -> [Action] {
        var actions: [Action] = []
        machine.pusherEventReceived(
            channel: channel, event: event, data: data, userID: nil, receivedAt: Fixture.time, now: now, into: &actions)
        return Self.withoutReceivedCounts(actions)
    }

    // MARK: Start and routing

    @Test func startSubscribesEveryChannelAndFilter() throws {
        let machine = try Self.machine()
        let actions = machine.started()
        #expect(actions.contains(.subscribeChannel("market-data")))
        #expect(actions.contains(.subscribeChannel("presence-lobby")))
        let filters = actions.compactMap { action -> String? in
            if case .subscribeTopicFilter(let subscription) = action { return subscription.filter }
            return nil
        }
        #expect(Set(filters).isSuperset(of: ["sensors/+/temperature", "raw/+", "lobby/members/+"]))
    }

    @Test func pusherEventIsRoutedToTheMQTTOutbox() throws {
        var machine = try Self.machine()
        let actions = event(&machine, channel: "market-data", event: "new-price", data: #"{"p":1}"#, at: t0)
        let publish = MQTTPublish(
            rule: "prices", topic: "dash/prices/new-price", payload: Array(#"{"p":1}"#.utf8), qos: 1, retain: false,
            userProperties: [MQTTUserProperty("pusher-channel", "market-data"), MQTTUserProperty("pusher-event", "new-price")])
        #expect(actions == [.enqueueToMQTT(publish, receivedAtMillis: millis)])
    }

    @Test func unmatchedAndProtocolEvents() throws {
        var machine = try Self.machine()
        #expect(
            event(&machine, channel: "market-data", event: "old-price", at: t0) == [
                .count(rule: "", direction: .pusherToMQTT, outcome: .unmatched, by: 1)
            ])
        #expect(event(&machine, channel: "market-data", event: "pusher:subscription_succeeded", at: t0).isEmpty)
        #expect(event(&machine, channel: "market-data", event: "pusher_internal:member_added", at: t0).isEmpty)
    }

    @Test func nothingIsTakenFromPusherOnceStopping() throws {
        var machine = try Self.machine()
        let first = machine.stopRequested()
        let second = machine.stopRequested()
        #expect(first)
        #expect(!second, "stop is idempotent: the second call is told so")
        #expect(event(&machine, channel: "market-data", event: "new-price", at: t0).isEmpty)
        // MQTT input keeps flowing into the outbox, which drains during the grace period.
        #expect(received(&machine, topic: "sensors/k/temperature", payload: "21", at: t0).count == 1)
    }

    @Test func mqttMessageIsRoutedToThePusherOutbox() throws {
        var machine = try Self.machine()
        let actions = received(&machine, topic: "sensors/kitchen/temperature", payload: "21.5", at: t0)
        #expect(
            actions == [
                .enqueueToPusher(
                    PusherEventPublish(rule: "temperatures", channel: "sensor-kitchen", event: "temperature", data: "21.5", via: .http),
                    receivedAtMillis: millis)
            ])
        #expect(
            received(&machine, topic: "elsewhere", payload: "1", at: t0) == [
                .count(rule: "", direction: .mqttToPusher, outcome: .unmatched, by: 1)
            ])
    }

    // MARK: Dead letters and drops

    @Test func deadLetterIsCountedLoggedAndPublished() throws {
        var machine = try Self.machine()
        let actions = received(&machine, topic: "raw/bad channel!", payload: "1", at: t0)
        #expect(actions.count == 4)
        #expect(actions.first == .count(rule: "bad-channel", direction: .mqttToPusher, outcome: .deadLettered, by: 1))
        guard case .logDeadLetter(let letter, suppressedLogs: 0) = actions[2] else {
            Issue.record("expected a log line, got \(actions[2])")
            return
        }
        #expect(letter.rule == "bad-channel")
        // Every letter is kept (docs/contract.md §8.3), with what routes it again.
        #expect(actions[1] == .keepDeadLetter(letter, direction: .mqttToPusher))
        #expect(letter.source == .mqtt(topic: "raw/bad channel!") && letter.payload == Array("1".utf8))
        #expect(
            actions[3]
                == .enqueueToMQTT(
                    MQTTPublish(rule: "bad-channel", topic: "bridge/dead", payload: letter.jsonPayload, qos: 1, retain: false),
                    receivedAtMillis: millis))
    }

    @Test func deadLetterWithoutTopicIsOnlyCountedAndLogged() throws {
        var machine = try Self.machine(mqtt: "")
        let actions = received(&machine, topic: "raw/bad channel!", payload: "1", at: t0)
        #expect(actions.count == 3)
        #expect(!actions.contains { if case .enqueueToMQTT = $0 { true } else { false } })
    }

    @Test func aRedrivenLetterIsRoutedByTheCurrentRulesPastTheInboundFilter() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        let stamp = UTCTimestamp(millisecondsSince1970: millis)
        // The letter of a rule that works: routed as it came, even though the same message was seen before.
        _ = received(&machine, topic: "sensors/kitchen/temperature", payload: "21.5", at: t0)
        let routed = machine.redriven(
            .mqtt(topic: "sensors/kitchen/temperature", payload: Array("21.5".utf8), qos: 1, retain: false), receivedAt: stamp, now: t0,
            into: &actions)
        #expect(routed == .routed)
        #expect(actions.contains(.received(.mqttToPusher, by: 1)))
        #expect(
            actions.contains(
                .enqueueToPusher(
                    PusherEventPublish(rule: "temperatures", channel: "sensor-kitchen", event: "temperature", data: "21.5", via: .http),
                    receivedAtMillis: millis)))
        // Still undeliverable: dead-lettered (and kept) again.
        actions = []
        #expect(
            machine.redriven(
                .mqtt(topic: "raw/bad channel!", payload: [0x31], qos: 0, retain: false), receivedAt: stamp, now: t0, into: &actions)
                == .routed)
        #expect(actions.contains { if case .keepDeadLetter = $0 { true } else { false } })
        // No rule takes it now: nothing happens.
        actions = []
        #expect(
            machine.redriven(.mqtt(topic: "nowhere", payload: [], qos: 0, retain: false), receivedAt: stamp, now: t0, into: &actions)
                == .unmatched)
        #expect(actions.isEmpty)
        #expect(
            machine.redriven(.toPusher(rule: "gone", channel: "c", event: "e", data: "d"), receivedAt: stamp, now: t0, into: &actions)
                == .unmatched)
        #expect(
            machine.redriven(
                .toPusher(rule: "temperatures", channel: "c", event: "e", data: "d"), receivedAt: stamp, now: t0, into: &actions)
                == .routed)
        #expect(
            actions.last
                == .enqueueToPusher(
                    PusherEventPublish(rule: "temperatures", channel: "c", event: "e", data: "d", via: .http), receivedAtMillis: millis))
    }

    @Test func deadLetterLogsAreLimitedToTwentyAMinute() throws {
        var machine = try Self.machine()
        var logged = 0
        var lastSuppressed = -1
        for i in 0..<25 {
            for action in received(&machine, topic: "raw/bad channel \(i)", payload: "1", at: t0.advanced(by: .milliseconds(i))) {
                if case .logDeadLetter = action { logged += 1 }
            }
        }
        #expect(logged == 20)
        for action in received(&machine, topic: "raw/bad channel later", payload: "1", at: t0.advanced(by: .seconds(61))) {
            if case .logDeadLetter(_, let suppressed) = action { lastSuppressed = suppressed }
        }
        #expect(lastSuppressed == 5, "the first line of the next minute says how many were left out")
    }

    @Test func dropsAreCountedByTheirNumberAndLoggedAtMostTwentyAMinute() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.dropped(3, rule: "prices", direction: .pusherToMQTT, now: t0, into: &actions)
        #expect(
            actions == [
                .count(rule: "prices", direction: .pusherToMQTT, outcome: .dropped, by: 3),
                .logDropped(rule: "prices", direction: .pusherToMQTT, dropped: 3, suppressedLogs: 0),
            ])
        actions.removeAll()
        machine.dropped(0, rule: "prices", direction: .pusherToMQTT, now: t0, into: &actions)
        #expect(actions.isEmpty)
        for _ in 0..<30 { machine.dropped(1, rule: "prices", direction: .pusherToMQTT, now: t0, into: &actions) }
        #expect(actions.filter { if case .logDropped = $0 { true } else { false } }.count == 19)
        #expect(actions.filter { if case .count = $0 { true } else { false } }.count == 30)
    }

    // MARK: Echoes and redeliveries

    @Test func mqtt311EchoOfOwnPublishIsSuppressedOnce() throws {
        var machine = try Self.machine(mqtt: "protocol = 4")
        machine.publishing(topic: "sensors/a/temperature", payload: Array("1".utf8), now: t0)
        let suppressed = [Action.count(rule: "", direction: .mqttToPusher, outcome: .suppressed, by: 1)]
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: t0.advanced(by: .milliseconds(2))) == suppressed)
        // The same message again is somebody else's: it crosses.
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: t0.advanced(by: .milliseconds(3))).count == 1)
    }

    @Test func mqtt5ReliesOnNoLocalAndRecordsNothing() throws {
        var machine = try Self.machine(mqtt: "protocol = 5")
        machine.publishing(topic: "sensors/a/temperature", payload: Array("1".utf8), now: t0)
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: t0).count == 1)
        let subscriptions = machine.started().compactMap { action -> MQTTSubscription? in
            if case .subscribeTopicFilter(let s) = action { return s }
            return nil
        }
        #expect(subscriptions.contains { $0.filter == "sensors/+/temperature" && $0.noLocal })
    }

    /// With MQTT 5 the subscriptions go to the broker exactly as the configuration asks, so a rule
    /// without `forward_retained` keeps Retain Handling "never".
    @Test func mqtt5SubscriptionsKeepTheirOptions() throws {
        let machine = try Self.machine(mqtt: "protocol = 5")
        let sent = machine.started().compactMap { action -> MQTTSubscription? in
            if case .subscribeTopicFilter(let subscription) = action { return subscription }
            return nil
        }
        #expect(!sent.isEmpty)
        #expect(sent == machine.settings.mqttSubscriptions.map(\.subscription))
        #expect(sent.contains { $0.retainHandling == .never })
    }

    @Test func mqtt311SubscriptionsCarryNoMQTT5Options() throws {
        let machine = try Self.machine(mqtt: "protocol = 4")
        for action in machine.started() {
            if case .subscribeTopicFilter(let subscription) = action {
                #expect(!subscription.noLocal)
                #expect(!subscription.retainAsPublished)
                #expect(subscription.retainHandling == .sendAlways)
            }
        }
    }

    @Test func redeliveryAfterReconnectIsSuppressedWithinTheWindow() throws {
        var machine = try Self.machine()
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis)
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: t0).count == 1)
        _ = machine.mqttConnectionChanged(to: "disconnected", connected: false, now: t0.advanced(by: .seconds(1)), receivedAtMillis: millis)
        let again = t0.advanced(by: .seconds(2))
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: again, receivedAtMillis: millis)
        let suppressed = [Action.count(rule: "", direction: .mqttToPusher, outcome: .suppressed, by: 1)]
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: again.advanced(by: .milliseconds(5))) == suppressed)
        // The first new message ends the check: a repeat after it is a new reading.
        #expect(received(&machine, topic: "sensors/b/temperature", payload: "2", at: again.advanced(by: .milliseconds(6))).count == 1)
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", at: again.advanced(by: .milliseconds(7))).count == 1)
    }

    @Test func qos0MessagesAreNeverRedeliveries() throws {
        var machine = try Self.machine()
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis)
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", qos: 0, at: t0).count == 1)
        _ = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0.advanced(by: .seconds(1)), receivedAtMillis: millis)
        #expect(received(&machine, topic: "sensors/a/temperature", payload: "1", qos: 0, at: t0.advanced(by: .seconds(1))).count == 1)
    }

    // MARK: Connections and presence

    @Test func connectionsCountReconnectsAndReportReadiness() throws {
        var machine = try Self.machine()
        #expect(machine.connectivity.notReadyReasons == ["pusher connecting", "mqtt connecting"])
        #expect(
            machine.pusherConnectionChanged(to: "connected", connected: true, wasConnected: false, receivedAtMillis: millis) == [
                .connectionChanged(.pusher, up: true, reconnected: false)
            ])
        let mqttUp = machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis)
        #expect(mqttUp.first == .connectionChanged(.mqtt, up: true, reconnected: false))
        #expect(mqttUp.contains(.publishStatus(topic: "pusher-mqtt-bridge/factory/status", payload: "online")))
        #expect(machine.connectivity.isReady)
        _ = machine.pusherConnectionChanged(to: "unavailable", connected: false, wasConnected: true, receivedAtMillis: millis)
        #expect(machine.connectivity.notReadyReasons == ["pusher unavailable"])
        #expect(
            machine.pusherConnectionChanged(to: "connected", connected: true, wasConnected: false, receivedAtMillis: millis) == [
                .connectionChanged(.pusher, up: true, reconnected: true)
            ])
        #expect(
            machine.mqttConnectionChanged(to: "connected", connected: true, now: t0, receivedAtMillis: millis).first
                == .connectionChanged(.mqtt, up: true, reconnected: true))
    }

    @Test func presenceMembersBecomeRetainedMessages() throws {
        var machine = try Self.machine()
        var actions: [Action] = []
        machine.presenceSubscribed(
            channel: "presence-lobby", members: [PresenceMember(userID: "ann")], receivedAtMillis: millis, into: &actions)
        let topics = actions.compactMap { action -> String? in
            if case .enqueueToMQTT(let publish, _) = action, publish.retain, publish.rule == "presence" { return publish.topic }
            return nil
        }
        #expect(topics.contains("lobby/members/ann"))
        #expect(topics.contains("lobby/count"))
        actions.removeAll()
        machine.presenceSubscribed(
            channel: "presence-unknown", members: [PresenceMember(userID: "x")], receivedAtMillis: millis, into: &actions)
        #expect(actions.isEmpty, "no mirror for the channel: nothing to publish")
    }

    @Test func ownRetainedMemberMessagesAreReadBackNotRouted() throws {
        var machine = try Self.machine()
        let actions = received(&machine, topic: "lobby/members/ghost", payload: "{}", at: t0)
        #expect(!actions.contains { if case .enqueueToPusher = $0 { true } else { false } })
        #expect(!actions.contains(.count(rule: "", direction: .mqttToPusher, outcome: .unmatched, by: 1)))
    }

    // MARK: Reload

    @Test func reloadSwapsRulesAndSubscribesOnlyTheDifference() throws {
        var machine = try Self.machine()
        let new = try Self.settings(
            extra: """
                [[bridge.rule]]
                name = "trades"
                from = "pusher"
                channel = "trades"
                topic = "dash/trades/{event}"

                [[bridge.rule]]
                name = "temperatures"
                from = "mqtt"
                topic = "sensors/+/temperature"
                channel = "sensor-{1}"
                event = "temperature"
                """)
        let actions = machine.rulesReplaced(by: new, receivedAtMillis: millis, now: t0)
        #expect(actions.contains(.unsubscribeChannel("market-data")))
        #expect(actions.contains(.unsubscribeChannel("presence-lobby")))
        #expect(actions.contains(.subscribeChannel("trades")))
        #expect(actions.contains(.unsubscribeTopicFilter("raw/+")))
        #expect(!actions.contains(.unsubscribeTopicFilter("sensors/+/temperature")))
        // The removed mirror clears what it published (its count, at least).
        #expect(actions.contains { if case .enqueueToMQTT(let p, _) = $0 { p.topic == "lobby/count" && p.retain } else { false } })
        #expect(event(&machine, channel: "trades", event: "buy", at: t0).count == 1)
        #expect(
            event(&machine, channel: "market-data", event: "new-price", at: t0) == [
                .count(rule: "", direction: .pusherToMQTT, outcome: .unmatched, by: 1)
            ])
    }

    @Test func heartbeatTellsWhetherTheBridgeIsResponsive() throws {
        var machine = try Self.machine()
        #expect(machine.isResponsive(now: t0, within: .seconds(1)), "no heartbeat yet: just started")
        machine.heartbeat(now: t0)
        #expect(machine.isResponsive(now: t0.advanced(by: .seconds(2)), within: .seconds(2)))
        #expect(!machine.isResponsive(now: t0.advanced(by: .seconds(3)), within: .seconds(2)))
    }
}
