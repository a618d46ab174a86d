/// Which way a message travels through a bridge (the `direction` label of `messages_total`).
public enum MessageDirection: String, Sendable, Hashable {
    /// Pusher events (and presence changes, dead letters) published to the MQTT broker.
    case pusherToMQTT = "pusher_to_mqtt"
    /// MQTT messages published into Pusher channels.
    case mqttToPusher = "mqtt_to_pusher"
}

/// What happened to a message (the `outcome` label of `messages_total`).
public enum MessageOutcome: String, Sendable, Hashable {
    /// Accepted by the far side (MQTT broker acknowledgement or Pusher HTTP 200).
    case delivered
    /// Published to the dead-letter topic or logged as undeliverable (bad name, size, UTF-8, 4xx).
    case deadLettered = "dead_lettered"
    /// Dropped by the buffer's overflow policy.
    case dropped
    /// Suppressed as our own echo (loop prevention) or as a redelivered duplicate.
    case suppressed
    /// Matched no rule's filter (counted per bridge with `rule=""`).
    case unmatched
    /// Matched a rule whose `where` did not match the payload (docs/contract.md §7.3).
    case filtered
    /// Replaced by a later message of its target within a `throttle` interval (§7.3).
    case coalesced
    /// Equal to the last payload forwarded for its target, under `on_change` (§7.3).
    case unchanged
}

/// Which connection of a bridge (the `side` label of the connection metrics).
public enum BridgeSide: String, Sendable, Hashable {
    /// The Pusher WebSocket connection.
    case pusher
    /// The MQTT broker connection.
    case mqtt
}
