/// What a client does after the server closes the connection with a code
/// (docs/pusher-protocol.md §1, "Close codes"; docs/contract.md §5.5).
public enum CloseCodeAction: Sendable, Hashable {
    /// 4000–4099: the server refuses this configuration. Do not retry unchanged: report an
    /// error, mark not ready, and retry only at the backoff cap (never a hot loop).
    case doNotRetryUnchanged
    /// 4100–4199 (e.g. over capacity): reconnect after backoff.
    case backoff
    /// 4200–4299 (generic, pong not received, inactivity): reconnect at once.
    case reconnectImmediately
    /// Any other code, or an unclean close: reconnect after backoff.
    case backoffUnknown
}

/// A Pusher close code (4000–4399) or any other WebSocket close code.
public struct PusherCloseCode: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt16

    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let sslOnly = PusherCloseCode(4000)
    public static let appDoesNotExist = PusherCloseCode(4001)
    public static let appDisabled = PusherCloseCode(4003)
    public static let overConnectionQuota = PusherCloseCode(4004)
    public static let pathNotFound = PusherCloseCode(4005)
    public static let invalidVersionStringFormat = PusherCloseCode(4006)
    public static let unsupportedProtocolVersion = PusherCloseCode(4007)
    public static let noProtocolVersionSupplied = PusherCloseCode(4008)
    public static let connectionIsUnauthorized = PusherCloseCode(4009)
    public static let overCapacity = PusherCloseCode(4100)
    public static let genericReconnectImmediately = PusherCloseCode(4200)
    public static let pongReplyNotReceived = PusherCloseCode(4201)
    public static let closedAfterInactivity = PusherCloseCode(4202)
    public static let clientEventRejected = PusherCloseCode(4301)
    public static let watchlistLimitExceeded = PusherCloseCode(4302)

    /// What the client should do after a close with this code.
    public var action: CloseCodeAction {
        switch rawValue {
        case 4000...4099: .doNotRetryUnchanged
        case 4100...4199: .backoff
        case 4200...4299: .reconnectImmediately
        default: .backoffUnknown
        }
    }

    /// The reason Pusher documents for this code, or "close code N".
    public var reason: String {
        switch rawValue {
        case 4000: "application only accepts SSL connections"
        case 4001: "application does not exist"
        case 4003: "application disabled"
        case 4004: "application is over connection quota"
        case 4005: "path not found"
        case 4006: "invalid version string format"
        case 4007: "unsupported protocol version"
        case 4008: "no protocol version supplied"
        case 4009: "connection is unauthorized"
        case 4100: "over capacity"
        case 4200: "generic reconnect immediately"
        case 4201: "pong reply not received"
        case 4202: "closed after inactivity"
        case 4301: "client event rejected due to rate limit"
        case 4302: "watchlist limit exceeded"
        default: "close code \(rawValue)"
        }
    }

    public var description: String { "\(rawValue) (\(reason))" }
}
