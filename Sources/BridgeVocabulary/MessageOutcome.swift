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
    /// A later copy of a Pusher event another of the bridge's connections delivered first
    /// (`[bridge.pusher] connections` ≥ 2; counted per bridge with `rule=""`, docs/pusher-merge.md).
    case duplicate
    /// In a cluster with `mqtt_to_pusher = "partition"`: another member owns its Pusher channel and
    /// sends it; this member kept it for the standby window and let it go (docs/contract.md §8.4).
    case elsewhere
}
