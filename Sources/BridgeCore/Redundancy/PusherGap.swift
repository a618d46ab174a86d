/// A time during which no connection of a bridge held a Pusher channel, so that events published
/// on it then reached nobody (Pusher keeps no history): reported once, when the channel is held
/// again, on `<status_topic>/gaps` and in the gap metrics (docs/pusher-merge.md, "Gap records").
/// Made by ``ChannelCoverage``.
public struct PusherGap: Sendable, Equatable {
    /// The channel.
    public var channel: String
    /// When the channel was last held (wall clock; for a restart or a takeover, the time the
    /// previous holder last recorded).
    public var from: UTCTimestamp
    /// When it was held again (the `subscription_succeeded` that ended the gap).
    public var to: UTCTimestamp
    /// How long the gap lasted, in milliseconds: measured on the monotonic clock when the gap
    /// began in this process, else `to − from` (never negative).
    public var milliseconds: Int64

    public init(channel: String, from: UTCTimestamp, to: UTCTimestamp, milliseconds: Int64) {
        self.channel = channel
        self.from = from
        self.to = to
        self.milliseconds = max(milliseconds, 0)
    }

    /// The length in seconds (`pusher_mqtt_bridge_pusher_gap_seconds_total`).
    public var seconds: Double { Double(milliseconds) / 1000 }

    /// The record as published: `{"channel":"C","from":"<RFC 3339 UTC ms>","to":"…","seconds":S}`
    /// with `S` to the millisecond (`12.345`).
    public var json: String {
        let fraction = String(milliseconds % 1000)
        let padded = String(repeating: "0", count: 3 - fraction.count) + fraction
        return "{\"channel\":\(JSONText.quoted(channel)),\"from\":\"\(from.rfc3339)\",\"to\":\"\(to.rfc3339)\","
            + "\"seconds\":\(milliseconds / 1000).\(padded)}"
    }
}
