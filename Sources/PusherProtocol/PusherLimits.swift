/// Pusher's published limits (docs/pusher-protocol.md §1 "Names and sizes", §2).
public enum PusherLimits {
    /// Longest channel name.
    public static let channelNameLength = 164
    /// Longest event name.
    public static let eventNameLength = 200
    /// Largest event `data`, in bytes (HTTP 413 beyond).
    public static let eventDataBytes = 10 * 1024
    /// Most channels one `POST /events` may name.
    public static let channelsPerTrigger = 100
    /// Most events in one `POST /batch_events`.
    public static let batchSize = 10
    /// Most members a presence channel lists.
    public static let presenceMembers = 100
    /// Largest presence `user_info`, in bytes.
    public static let userInfoBytes = 1000
    /// Longest presence `user_id`.
    public static let userIDLength = 128
    /// Client events one connection may send per second (over → 4301).
    public static let clientEventsPerSecond = 10
    /// Most user ids a signed-in user's `watchlist` may hold (over → `pusher:error` 4302).
    public static let watchlistIDs = 100
}
