/// One bridge as a Home Assistant device, for MQTT discovery (docs/contract.md §8.3): the config
/// documents of its entities, where they go, and the one retained JSON state topic they read.
///
/// Pure: the same settings always give the same documents, byte for byte, so that republishing
/// after Home Assistant's birth message changes nothing it has stored.
///
/// Names, for bridge `factory` (in a cluster, member `a`):
///
/// | what | value |
/// |---|---|
/// | node id | `pusher_mqtt_bridge_factory` (`pusher_mqtt_bridge_factory_a`) |
/// | config topic | `<prefix>/<component>/<node id>/<object id>/config` |
/// | `unique_id` | `<node id>_<object id>` |
/// | state topic | `<status topic>/state` (`<status_topic>/a/state`) |
/// | availability | the status topic, `online` / `offline` |
public struct HomeAssistantDevice: Sendable, Equatable {
    /// The two kinds of entity the bridge announces.
    public enum Component: String, Sendable, Equatable {
        /// `binary_sensor`: the connections.
        case binarySensor = "binary_sensor"
        /// `sensor`: rates, buffer, dead letters, cluster numbers.
        case sensor
    }

    /// One entity: what Home Assistant shows, and the field of the state JSON it reads.
    public struct Entity: Sendable, Equatable {
        public var component: Component
        /// The last level but one of the config topic, and the end of `unique_id`.
        public var objectID: String
        /// The entity's name, shown after the device's.
        public var name: String
        /// The field of the state JSON (``HomeAssistantState``).
        public var field: String
        public var deviceClass: String?
        public var stateClass: String?
        public var unit: String?
        public var icon: String?
    }

    /// Home Assistant's discovery prefix (`homeassistant_prefix`).
    public let prefix: String
    /// `pusher_mqtt_bridge_<bridge>`, `_<instance>` added in a cluster.
    public let nodeID: String
    /// The device's name: `pusher-mqtt-bridge <bridge>`, ` (<instance>)` added in a cluster.
    public let name: String
    /// `sw_version`.
    public let version: String
    /// The status topic this process writes `online` / `offline` to (its Last Will): availability.
    public let availabilityTopic: String
    /// The retained JSON every entity reads: `<effective status topic>/state`.
    public let stateTopic: String
    /// The entities, in the order their configs are published.
    public let entities: [Entity]

    /// The device of `bridge` under discovery prefix `prefix`.
    public init(bridge: BridgeSettings, prefix: String, version: String = BridgeCoreVersion.current) {
        self.prefix = prefix
        self.version = version
        let instance = bridge.cluster?.instance
        nodeID = "pusher_mqtt_bridge_\(bridge.name)" + (instance.map { "_\($0)" } ?? "")
        name = "pusher-mqtt-bridge \(bridge.name)" + (instance.map { " (\($0))" } ?? "")
        availabilityTopic = bridge.effectiveStatusTopic
        stateTopic = Self.stateTopic(of: bridge)
        var entities: [Entity] = [
            Entity(
                component: .binarySensor, objectID: "mqtt_connection", name: "MQTT connection",
                field: HomeAssistantState.Field.mqttConnected,
                deviceClass: "connectivity"),
            Entity(
                component: .binarySensor, objectID: "pusher_connection", name: "Pusher connection",
                field: HomeAssistantState.Field.pusherConnected, deviceClass: "connectivity"),
            Entity(
                component: .sensor, objectID: "pusher_to_mqtt_rate", name: "Pusher to MQTT",
                field: HomeAssistantState.Field.pusherToMQTTRate,
                stateClass: "measurement", unit: "msg/s", icon: "mdi:arrow-right-bold"),
            Entity(
                component: .sensor, objectID: "mqtt_to_pusher_rate", name: "MQTT to Pusher",
                field: HomeAssistantState.Field.mqttToPusherRate,
                stateClass: "measurement", unit: "msg/s", icon: "mdi:arrow-left-bold"),
            Entity(
                component: .sensor, objectID: "buffered_messages", name: "Buffered messages", field: HomeAssistantState.Field.buffered,
                stateClass: "measurement", unit: "messages", icon: "mdi:tray-full"),
            Entity(
                component: .sensor, objectID: "dead_letters", name: "Dead letters", field: HomeAssistantState.Field.deadLetters,
                stateClass: "total_increasing", unit: "messages", icon: "mdi:email-alert"),
        ]
        if bridge.cluster != nil {
            entities += [
                Entity(
                    component: .sensor, objectID: "cluster_members", name: "Cluster members",
                    field: HomeAssistantState.Field.clusterMembers,
                    stateClass: "measurement", icon: "mdi:server-network"),
                Entity(
                    component: .sensor, objectID: "channels_held", name: "Channels held", field: HomeAssistantState.Field.channelsHeld,
                    stateClass: "measurement", unit: "channels", icon: "mdi:antenna"),
            ]
        }
        self.entities = entities
    }

    /// `<effective status topic>/state`: the retained JSON the entities read.
    public static func stateTopic(of bridge: BridgeSettings) -> String { "\(bridge.effectiveStatusTopic)/state" }

    /// `<prefix>/<component>/<node id>/<object id>/config`.
    public func configTopic(_ entity: Entity) -> String {
        "\(prefix)/\(entity.component.rawValue)/\(nodeID)/\(entity.objectID)/config"
    }

    /// `<node id>_<object id>`: unique among every bridge and cluster member.
    public func uniqueID(_ entity: Entity) -> String { "\(nodeID)_\(entity.objectID)" }

    /// The template that turns the state JSON into the entity's state: `ON`/`OFF` for a binary
    /// sensor (its default payloads), the number for a sensor.
    public static func valueTemplate(_ entity: Entity) -> String {
        switch entity.component {
        case .binarySensor: "{{ 'ON' if value_json.\(entity.field) else 'OFF' }}"
        case .sensor: "{{ value_json.\(entity.field) }}"
        }
    }

    /// The config document of `entity`: one JSON object, keys in a fixed order.
    public func configPayload(_ entity: Entity) -> String {
        var fields: [(String, String)] = [
            ("name", JSONText.quoted(entity.name)),
            ("unique_id", JSONText.quoted(uniqueID(entity))),
            ("object_id", JSONText.quoted(uniqueID(entity))),
            ("state_topic", JSONText.quoted(stateTopic)),
            ("value_template", JSONText.quoted(Self.valueTemplate(entity))),
            ("availability_topic", JSONText.quoted(availabilityTopic)),
            ("payload_available", JSONText.quoted("online")),
            ("payload_not_available", JSONText.quoted("offline")),
        ]
        if let deviceClass = entity.deviceClass { fields.append(("device_class", JSONText.quoted(deviceClass))) }
        if let stateClass = entity.stateClass { fields.append(("state_class", JSONText.quoted(stateClass))) }
        if let unit = entity.unit { fields.append(("unit_of_measurement", JSONText.quoted(unit))) }
        if let icon = entity.icon { fields.append(("icon", JSONText.quoted(icon))) }
        if entity.objectID != "mqtt_connection", entity.objectID != "pusher_connection" {
            fields.append(("entity_category", JSONText.quoted("diagnostic")))
        }
        let device =
            "{\"identifiers\":[\(JSONText.quoted(nodeID))],\"name\":\(JSONText.quoted(name)),"
            + "\"model\":\"pusher-mqtt-bridge\",\"manufacturer\":\"pusher-mqtt-bridge\",\"sw_version\":\(JSONText.quoted(version))}"
        fields.append(("device", device))
        return "{" + fields.map { "\(JSONText.quoted($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// Every config, in order: what is published (retained) when discovery is on.
    public var configs: [HomeAssistantMessage] {
        entities.map { HomeAssistantMessage(topic: configTopic($0), payload: configPayload($0)) }
    }

    /// What turns the device off: an empty retained message on every config topic (Home Assistant
    /// removes the entity, and the device with its last one), then on the state topic.
    public var removals: [HomeAssistantMessage] {
        entities.map { HomeAssistantMessage(topic: configTopic($0), payload: "") } + [HomeAssistantMessage(topic: stateTopic, payload: "")]
    }
}

/// A retained publish (QoS 1) for Home Assistant: a config, a removal or the state.
public struct HomeAssistantMessage: Sendable, Equatable {
    public var topic: String
    public var payload: String

    public init(topic: String, payload: String) {
        self.topic = topic
        self.payload = payload
    }
}
