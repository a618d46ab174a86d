/// The user-level settings of one app (docs/pusher-protocol.md §1, "User sign-in"): hosted
/// Pusher has both as per-app dashboard settings, off by default.
public struct PusherLocalUserSettings: Sendable, Hashable {
    /// Whether signed-in users' watchlists get `pusher_internal:watchlist_events` (online /
    /// offline of the users they watch). `--watchlist-events`.
    public var watchlistEvents: Bool
    /// How long a new connection may take to sign in before it is closed with 4009; `nil`:
    /// sign-in is optional. `--require-signin` (30 s, ``defaultSigninTimeout``) and
    /// `--signin-timeout S`.
    public var signinTimeout: Duration?

    /// The timeout `--require-signin` uses unless `--signin-timeout` says otherwise (hosted
    /// Pusher's user authentication timeout is 30 s).
    public static let defaultSigninTimeout: Duration = .seconds(30)

    /// Settings; both off by default.
    public init(watchlistEvents: Bool = false, signinTimeout: Duration? = nil) {
        self.watchlistEvents = watchlistEvents
        self.signinTimeout = signinTimeout
    }

    /// Problems that make these settings unusable (empty when valid).
    var problems: [String] {
        if let signinTimeout, signinTimeout <= .zero { return ["sign-in timeout must be positive"] }
        return []
    }
}
