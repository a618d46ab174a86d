import TestSupport
import Testing

@testable import BridgeCore

/// The discovery machine as event sequences on a manual clock (docs/style.md §1, §2, §7).
@Suite struct HomeAssistantPublisherTests {
    typealias Publisher = HomeAssistantPublisher<TestInstant>
    static let t0 = TestInstant.at(milliseconds: 0)
    static let on = HomeAssistantSettings(enabled: true)

    static func publisher(_ settings: HomeAssistantSettings = on) throws -> Publisher {
        Publisher(bridge: try HomeAssistantDeviceTests.bridge(), settings: settings, version: "1.2.3")
    }

    static func published(_ actions: [Publisher.Action]) -> [String] {
        actions.compactMap { if case .publish(let message) = $0 { message.topic } else { nil } }
    }

    @Test func connectSubscribesAnnouncesAndPublishesTheState() throws {
        var publisher = try Self.publisher()
        #expect(publisher.take(now: Self.t0, reading: HomeAssistantReading()).isEmpty)
        publisher.mqttConnected(now: Self.t0)
        let actions = publisher.take(now: Self.t0, reading: HomeAssistantReading(mqttConnected: true))
        #expect(actions.first == .subscribe(filter: "homeassistant/status"))
        #expect(Self.published(actions) == publisher.device.configs.map(\.topic) + [publisher.device.stateTopic])
        #expect(Array(actions.dropFirst().prefix(6)) == publisher.device.configs.map(Publisher.Action.publish))
        #expect(publisher.nextDeadline == Self.t0.advanced(by: .seconds(10)))
    }

    @Test func offPublishesNothingAndTakesNoMessages() throws {
        var publisher = try Self.publisher(HomeAssistantSettings())
        publisher.mqttConnected(now: Self.t0)
        publisher.connectionChanged(now: Self.t0)
        publisher.birthMessageReceived(payload: Array("online".utf8), now: Self.t0)
        #expect(publisher.take(now: Self.t0, reading: HomeAssistantReading()).isEmpty)
        #expect(publisher.nextDeadline == nil)
        #expect(!publisher.isBirthTopic("homeassistant/status"))
    }

    @Test func stateEveryTenSecondsWithRates() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading(mqttConnected: true))
        #expect(publisher.take(now: Self.t0.advanced(by: .seconds(9)), reading: HomeAssistantReading()).isEmpty)
        let t10 = Self.t0.advanced(by: .seconds(10))
        let actions = publisher.take(now: t10, reading: HomeAssistantReading(mqttConnected: true, deliveredToMQTT: 50))
        #expect(
            actions == [
                .publish(
                    HomeAssistantMessage(
                        topic: "pusher-mqtt-bridge/factory/status/state",
                        payload: #"{"mqtt_connected":true,"pusher_connected":false,"pusher_to_mqtt_per_second":5,"#
                            + #""mqtt_to_pusher_per_second":0,"buffered":0,"dead_letters":0}"#))
            ])
        #expect(publisher.nextDeadline == Self.t0.advanced(by: .seconds(20)))
    }

    @Test func aConnectionChangePublishesTheStateAtOnce() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        let t3 = Self.t0.advanced(by: .seconds(3))
        publisher.connectionChanged(now: t3)
        #expect(publisher.nextDeadline == t3)
        #expect(
            Self.published(publisher.take(now: t3, reading: HomeAssistantReading(pusherConnected: true))) == [publisher.device.stateTopic])
    }

    @Test func birthOnlineRepublishesConfigsOtherPayloadsDoNot() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        #expect(publisher.isBirthTopic("homeassistant/status"))
        #expect(!publisher.isBirthTopic("homeassistant/status/x"))
        let t1 = Self.t0.advanced(by: .seconds(1))
        for payload in ["offline", "Online", "online ", ""] {
            publisher.birthMessageReceived(payload: Array(payload.utf8), now: t1)
            #expect(publisher.take(now: t1, reading: HomeAssistantReading()).isEmpty, "payload \(payload)")
        }
        publisher.birthMessageReceived(payload: Array("online".utf8), now: t1)
        #expect(
            Self.published(publisher.take(now: t1, reading: HomeAssistantReading()))
                == publisher.device.configs.map(\.topic) + [publisher.device.stateTopic])
    }

    @Test func nothingWhileDisconnectedEverythingAgainOnReconnect() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        publisher.mqttDisconnected()
        #expect(publisher.take(now: Self.t0, reading: HomeAssistantReading()).isEmpty)
        #expect(publisher.nextDeadline == nil)
        publisher.birthMessageReceived(payload: Array("online".utf8), now: Self.t0)
        #expect(publisher.take(now: Self.t0, reading: HomeAssistantReading()).isEmpty)
        let t5 = Self.t0.advanced(by: .seconds(5))
        publisher.mqttConnected(now: t5)
        let actions = publisher.take(now: t5, reading: HomeAssistantReading())
        #expect(actions.first == .subscribe(filter: "homeassistant/status"))
        #expect(Self.published(actions).count == 7)
    }

    @Test func reloadOffRemovesEveryConfigAndUnsubscribes() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        let device = publisher.device
        let t2 = Self.t0.advanced(by: .seconds(2))
        publisher.settingsChanged(to: HomeAssistantSettings(enabled: false), now: t2)
        let actions = publisher.take(now: t2, reading: HomeAssistantReading())
        #expect(actions == device.removals.map(Publisher.Action.publish) + [.unsubscribe(filter: "homeassistant/status")])
        #expect(publisher.nextDeadline == nil)
        #expect(!publisher.isBirthTopic("homeassistant/status"))
        // And on again: everything back.
        publisher.settingsChanged(to: Self.on, now: t2)
        let again = publisher.take(now: t2, reading: HomeAssistantReading())
        #expect(again.first == .subscribe(filter: "homeassistant/status"))
        #expect(Self.published(again) == device.configs.map(\.topic) + [device.stateTopic])
    }

    @Test func reloadChangingThePrefixMovesTheConfigs() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        let old = publisher.device
        publisher.settingsChanged(to: HomeAssistantSettings(enabled: true, prefix: "ha"), now: Self.t0)
        let actions = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        let removals = old.removals.map(Publisher.Action.publish)
        #expect(Array(actions.prefix(removals.count)) == removals)
        #expect(
            Array(actions.dropFirst(removals.count).prefix(2)) == [
                .unsubscribe(filter: "homeassistant/status"), .subscribe(filter: "ha/status"),
            ])
        #expect(Self.published(actions).suffix(7).allSatisfy { $0.hasPrefix("ha/") || $0 == old.stateTopic })
    }

    @Test func reloadWhileDisconnectedIsTakenAtTheNextConnect() throws {
        var publisher = try Self.publisher(HomeAssistantSettings())
        publisher.settingsChanged(to: Self.on, now: Self.t0)
        #expect(publisher.take(now: Self.t0, reading: HomeAssistantReading()).isEmpty)
        publisher.mqttConnected(now: Self.t0)
        #expect(Self.published(publisher.take(now: Self.t0, reading: HomeAssistantReading())).count == 7)
    }

    @Test func anUnchangedReloadDoesNothing() throws {
        var publisher = try Self.publisher()
        publisher.mqttConnected(now: Self.t0)
        _ = publisher.take(now: Self.t0, reading: HomeAssistantReading())
        publisher.settingsChanged(to: Self.on, now: Self.t0.advanced(by: .seconds(1)))
        #expect(publisher.take(now: Self.t0.advanced(by: .seconds(1)), reading: HomeAssistantReading()).isEmpty)
    }
}
