import PusherProtocol

/// Counters of one app, readable through the control endpoint.
public struct AppCounters: Sendable, Equatable {
    /// WebSocket connections opened since start, including those refused by the control switch
    /// (so a reconnect loop against a refusing server can be counted).
    public var connectionsOpened = 0
    /// Connections closed at once because the control switch refused them.
    public var connectionsRefused = 0
    /// Events published through the HTTP API (one per channel named).
    public var eventsPublished = 0
    /// Client events accepted and relayed.
    public var clientEvents = 0
    /// Channel-event frames handed to connections (publishes × recipients, client events, cache replays).
    public var framesDelivered = 0
    /// Frames from clients that could not be understood.
    public var badFrames = 0
    /// Subscriptions refused (bad auth, bad names, double subscription, …).
    public var refusedSubscriptions = 0
    /// Client events refused (not subscribed, wrong channel kind, rate limit, …).
    public var refusedClientEvents = 0
    /// `pusher:signin`s accepted.
    public var signins = 0
    /// `pusher:signin`s refused (bad data, forged signature, another user on a signed-in connection, …).
    public var refusedSignins = 0
    /// Watchlists cut to their first 100 ids (`pusher:error` 4302 sent).
    public var watchlistsTruncated = 0
    /// `pusher_internal:watchlist_events` frames sent (one per recipient).
    public var watchlistEvents = 0
    /// Connections closed by `POST /apps/ID/users/USER/terminate_connections`.
    public var connectionsTerminated = 0
    /// Connections closed because they did not sign in within the sign-in timeout.
    public var signinTimeouts = 0
}
