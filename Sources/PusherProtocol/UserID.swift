/// User ids of Pusher's user sign-in and the `#server-to-user-<id>` channel
/// (docs/pusher-protocol.md §1, "User sign-in").
///
/// A user id is what `user_data.id` of `pusher:signin` carries: 1 to 200 characters of the
/// channel-name alphabet `A-Z a-z 0-9 _ - = @ , . ;`. The same rule serves pusher-local (which
/// refuses other ids), the HTTP API client (`sendToUser`, `terminateUserConnections`) and any
/// configuration that names a user.
public enum UserID {
    /// Longest user id, in characters (bytes: the alphabet is ASCII).
    public static let maxLength = 200

    /// The prefix of every user's own channel: `#server-to-user-<id>`.
    public static let serverToUserPrefix = "#server-to-user-"

    /// Why `id` is not a valid user id, or `nil` when it is.
    public static func problem(with id: String) -> String? {
        if id.isEmpty { return "user id is empty" }
        if id.utf8.count > maxLength { return "user id is longer than \(maxLength) characters" }
        for byte in id.utf8 where !ChannelName.isChannelNameByte(byte) {
            let shown = byte < 0x80 ? String(UnicodeScalar(byte)) : "non-ASCII"
            return "user id contains '\(shown)'; allowed are A-Z a-z 0-9 _ - = @ , . ;"
        }
        return nil
    }

    /// The channel on which the server sends to user `id` alone: `#server-to-user-<id>`.
    public static func serverToUserChannel(_ id: String) -> String { serverToUserPrefix + id }

    /// The user id of a `#server-to-user-<id>` channel name (not validated), or `nil` when
    /// `channel` does not start with that prefix.
    public static func ofServerToUserChannel(_ channel: String) -> String? {
        guard channel.hasUTF8Prefix(serverToUserPrefix) else { return nil }
        return String(decoding: channel.utf8.dropFirst(serverToUserPrefix.utf8.count), as: UTF8.self)
    }
}
