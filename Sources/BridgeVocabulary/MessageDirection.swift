/// Which way a message travels through a bridge (the `direction` label of `messages_total`).
public enum MessageDirection: String, Sendable, Hashable {
    /// Pusher events (and presence changes, dead letters) published to the MQTT broker.
    case pusherToMQTT = "pusher_to_mqtt"
    /// MQTT messages published into Pusher channels.
    case mqttToPusher = "mqtt_to_pusher"
}
