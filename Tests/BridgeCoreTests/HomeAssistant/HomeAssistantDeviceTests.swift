import Foundation
import Testing

@testable import BridgeCore

/// Home Assistant discovery documents (docs/contract.md §8.3): exact topics, ids, device block,
/// templates, and the cluster's naming.
@Suite struct HomeAssistantDeviceTests {
    static func bridge(cluster: String = "", mqtt: String = "") throws -> BridgeSettings {
        let text = Fixture.config(mqtt: mqtt, extra: cluster)
        return try #require(Fixture.parse(text).bridges.first)
    }

    /// The JSON object of a config payload (parsed with Foundation: the test reads what Home Assistant would).
    static func object(_ payload: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
    }

    @Test func singleBridgeTopicsAndIDs() throws {
        let device = HomeAssistantDevice(bridge: try Self.bridge(), prefix: "homeassistant", version: "1.2.3")
        #expect(device.nodeID == "pusher_mqtt_bridge_factory")
        #expect(device.name == "pusher-mqtt-bridge factory")
        #expect(device.stateTopic == "pusher-mqtt-bridge/factory/status/state")
        #expect(device.availabilityTopic == "pusher-mqtt-bridge/factory/status")
        #expect(
            device.configs.map(\.topic) == [
                "homeassistant/binary_sensor/pusher_mqtt_bridge_factory/mqtt_connection/config",
                "homeassistant/binary_sensor/pusher_mqtt_bridge_factory/pusher_connection/config",
                "homeassistant/sensor/pusher_mqtt_bridge_factory/pusher_to_mqtt_rate/config",
                "homeassistant/sensor/pusher_mqtt_bridge_factory/mqtt_to_pusher_rate/config",
                "homeassistant/sensor/pusher_mqtt_bridge_factory/buffered_messages/config",
                "homeassistant/sensor/pusher_mqtt_bridge_factory/dead_letters/config",
            ])
    }

    @Test func connectivityConfigIsExact() throws {
        let device = HomeAssistantDevice(bridge: try Self.bridge(), prefix: "homeassistant", version: "1.2.3")
        let mqtt = try #require(device.configs.first)
        #expect(
            mqtt.payload
                == #"{"name":"MQTT connection","unique_id":"pusher_mqtt_bridge_factory_mqtt_connection","#
                + #""object_id":"pusher_mqtt_bridge_factory_mqtt_connection","state_topic":"pusher-mqtt-bridge/factory/status/state","#
                + #""value_template":"{{ 'ON' if value_json.mqtt_connected else 'OFF' }}","#
                + #""availability_topic":"pusher-mqtt-bridge/factory/status","payload_available":"online","#
                + #""payload_not_available":"offline","device_class":"connectivity","#
                + #""device":{"identifiers":["pusher_mqtt_bridge_factory"],"name":"pusher-mqtt-bridge factory","#
                + #""model":"pusher-mqtt-bridge","manufacturer":"pusher-mqtt-bridge","sw_version":"1.2.3"}}"#)
    }

    @Test func everyConfigIsJSONWithItsOwnFieldAndTheSameDevice() throws {
        let device = HomeAssistantDevice(bridge: try Self.bridge(), prefix: "ha", version: "1.2.3")
        var uniqueIDs: Set<String> = []
        for (entity, config) in zip(device.entities, device.configs) {
            let object = try Self.object(config.payload)
            #expect(object["state_topic"] as? String == device.stateTopic)
            #expect(object["availability_topic"] as? String == device.availabilityTopic)
            #expect((object["value_template"] as? String)?.contains("value_json.\(entity.field)") == true)
            let deviceBlock = try #require(object["device"] as? [String: Any])
            #expect(deviceBlock["identifiers"] as? [String] == ["pusher_mqtt_bridge_factory"])
            #expect(deviceBlock["sw_version"] as? String == "1.2.3")
            uniqueIDs.insert(try #require(object["unique_id"] as? String))
            #expect(config.topic.hasPrefix("ha/\(entity.component.rawValue)/pusher_mqtt_bridge_factory/"))
        }
        #expect(uniqueIDs.count == device.entities.count)
        let rates = device.entities.filter { $0.objectID.hasSuffix("_rate") }
        #expect(rates.map(\.unit) == ["msg/s", "msg/s"])
        let deadLetters = try #require(device.entities.first { $0.objectID == "dead_letters" })
        #expect(deadLetters.stateClass == "total_increasing")
        #expect(device.entities.filter { $0.deviceClass == "connectivity" }.map(\.component) == [.binarySensor, .binarySensor])
    }

    @Test func clusterMemberIsADeviceOfItsOwn() throws {
        let cluster = "[bridge.cluster]\ngroup = \"g\"\ninstance = \"node-1\""
        let device = HomeAssistantDevice(bridge: try Self.bridge(cluster: cluster), prefix: "homeassistant", version: "1.2.3")
        #expect(device.nodeID == "pusher_mqtt_bridge_factory_node-1")
        #expect(device.name == "pusher-mqtt-bridge factory (node-1)")
        #expect(device.stateTopic == "pusher-mqtt-bridge/factory/status/node-1/state")
        #expect(device.availabilityTopic == "pusher-mqtt-bridge/factory/status/node-1")
        #expect(device.entities.suffix(2).map(\.objectID) == ["cluster_members", "channels_held"])
        #expect(
            device.configs.last?.topic == "homeassistant/sensor/pusher_mqtt_bridge_factory_node-1/channels_held/config")
        let object = try Self.object(try #require(device.configs.last).payload)
        #expect(object["unique_id"] as? String == "pusher_mqtt_bridge_factory_node-1_channels_held")
        #expect(object["value_template"] as? String == "{{ value_json.channels_held }}")
    }

    @Test func statusTopicComesFromTheBridge() throws {
        let device = HomeAssistantDevice(
            bridge: try Self.bridge(mqtt: "status_topic = \"plant/bridge\""), prefix: "homeassistant", version: "1.2.3")
        #expect(device.stateTopic == "plant/bridge/state")
        #expect(device.availabilityTopic == "plant/bridge")
    }

    @Test func removalsEmptyEveryConfigAndTheState() throws {
        let device = HomeAssistantDevice(bridge: try Self.bridge(), prefix: "homeassistant", version: "1.2.3")
        #expect(device.removals.map(\.topic) == device.configs.map(\.topic) + [device.stateTopic])
        #expect(device.removals.allSatisfy { $0.payload.isEmpty })
    }

    @Test func stateJSON() throws {
        let reading = HomeAssistantReading(
            mqttConnected: true, pusherConnected: false, deliveredToMQTT: 150, deliveredToPusher: 7, buffered: 4, deadLetters: 2)
        let previous = HomeAssistantReading(deliveredToMQTT: 25, deliveredToPusher: 7)
        let state = HomeAssistantState(reading: reading, previous: previous, elapsed: .seconds(10))
        #expect(
            state.json
                == #"{"mqtt_connected":true,"pusher_connected":false,"pusher_to_mqtt_per_second":12.5,"#
                + #""mqtt_to_pusher_per_second":0,"buffered":4,"dead_letters":2}"#)
        var clustered = reading
        clustered.cluster = (members: 3, channelsHeld: 17)
        let first = HomeAssistantState(reading: clustered, previous: nil, elapsed: .zero)
        #expect(
            first.json.hasSuffix(
                #""pusher_to_mqtt_per_second":0,"mqtt_to_pusher_per_second":0,"buffered":4,"dead_letters":2,"cluster_members":3,"channels_held":17}"#
            ))
    }

    @Test(arguments: [
        (1, 3_000, "0.33"), (2, 3_000, "0.67"), (1, 200, "5"), (7, 10_000, "0.7"), (1, 1_000_000, "0"), (100_000, 1_000, "100000"),
    ])
    func ratesHaveAtMostTwoDecimals(count: Int, milliseconds: Int64, expected: String) {
        let state = HomeAssistantState(
            reading: HomeAssistantReading(deliveredToPusher: count), previous: HomeAssistantReading(), elapsed: .milliseconds(milliseconds))
        #expect(state.json.contains(#""mqtt_to_pusher_per_second":\#(expected),"#))
    }

    @Test func aCounterThatWentBackGivesNoRate() {
        let state = HomeAssistantState(
            reading: HomeAssistantReading(deliveredToMQTT: 3), previous: HomeAssistantReading(deliveredToMQTT: 10), elapsed: .seconds(1))
        #expect(state.pusherToMQTTCentiRate == 0)
    }
}
