import PusherProtocol

/// Everything the client reports, in one ordered stream (see ``PusherClient/updates(bufferingPolicy:)``).
public enum PusherUpdate: Sendable, Hashable {
    /// An event on a channel (application events, client events, `pusher:cache_miss`,
    /// `pusher:subscription_count`).
    case event(PusherEvent)
    /// A presence member list change.
    case presence(PusherPresenceChange)
    /// A channel's subscription succeeded (for presence also reported as ``presence(_:)``).
    case subscriptionSucceeded(channel: String)
    /// A channel's subscription failed (auth refused, `pusher:subscription_error`, …).
    case subscriptionFailed(channel: String, error: PusherError)
    /// The connection changed state.
    case connectionStateChanged(PusherConnectionStateChange)
    /// Sign-in results, events sent to the signed-in user and watchlist changes.
    case user(PusherUserUpdate)
    /// An error not tied to one channel's subscription (`pusher:error`, refused connection, …).
    case error(PusherError)
}
