import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A channel's state from the HTTP API.
public struct PusherChannelInfo: Sendable, Hashable {
    /// `occupied`, when the server reported it.
    public var occupied: Bool?
    /// `user_count` (presence channels, when asked for).
    public var userCount: Int?
    /// `subscription_count` (when asked for and enabled).
    public var subscriptionCount: Int?
    /// The reply's raw JSON.
    public var json: String

    /// Reads the known fields of a channel info object; unknown fields stay in ``json``.
    public init(json: String) {
        self.json = json
        let fields = (try? JSONScanner.object(json)) ?? [:]
        if case .raw(let value)? = fields["occupied"] { occupied = value == "true" }
        userCount = fields["user_count"]?.stringOrNumber.flatMap { Int($0) }
        subscriptionCount = fields["subscription_count"]?.stringOrNumber.flatMap { Int($0) }
    }
}
