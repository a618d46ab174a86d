import PusherProtocol

/// An HTTP API failure: status and a plain-text body (docs/pusher-protocol.md §2, "Statuses").
public struct APIError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String
    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }
    static func badRequest(_ message: String) -> APIError { APIError(status: 400, message: message) }
    static func tooLarge(_ message: String) -> APIError { APIError(status: 413, message: message) }
    /// What a publish gets while the app is over its message quota (the control switch `quota`):
    /// status 403, as hosted Pusher answers an app over quota or disabled, with a one-line text body.
    static let overQuota = APIError(status: 403, message: "Over quota")
}
