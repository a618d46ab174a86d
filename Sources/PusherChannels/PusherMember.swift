import PusherProtocol

/// A member of a presence channel.
public struct PusherMember: Sendable, Hashable {
    /// The member's `user_id`, normalised to a string (servers may send numbers).
    public var userID: String
    /// The member's `user_info` as raw JSON text; `nil` when the server sent none.
    public var userInfo: String?

    /// A member from its parts.
    public init(userID: String, userInfo: String? = nil) {
        self.userID = userID
        self.userInfo = userInfo
    }
}
