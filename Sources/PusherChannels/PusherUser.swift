import PusherProtocol

/// The user a connection signed in as (`pusher:signin_success`, docs/pusher-protocol.md §1
/// "User sign-in").
public struct PusherUser: Sendable, Hashable {
    /// The user id (`user_data.id`).
    public var id: String
    /// `user_data.user_info` as JSON text, when present.
    public var userInfo: String?
    /// The ids whose presence the server reports to this connection (`user_data.watchlist`).
    public var watchlist: [String]
    /// The `user_data` JSON string, exactly as signed.
    public var userData: String

    /// A user from its parts.
    public init(id: String, userInfo: String? = nil, watchlist: [String] = [], userData: String) {
        self.id = id
        self.userInfo = userInfo
        self.watchlist = watchlist
        self.userData = userData
    }

    /// The user `userData` describes, or why it is not one: a JSON object with a string `id`
    /// (1–200 characters of the channel-name alphabet), an optional `user_info` and an optional
    /// `watchlist` array of ids.
    public init(userData: String) throws(PusherError) {
        let members: [String: JSONScanner.Value]
        do {
            members = try JSONScanner.object(userData)
        } catch {
            throw .invalidArgument("user_data is not a JSON object: \(error)")
        }
        guard case .string(let id)? = members["id"] else {
            throw .invalidArgument("user_data has no string 'id'")
        }
        if let problem = UserID.problem(with: id) { throw .invalidArgument(problem) }
        var watchlist: [String] = []
        switch members["watchlist"] {
        case .raw(let text)?:
            guard let elements = try? JSONScanner.arrayElements(of: text) else {
                throw .invalidArgument("user_data 'watchlist' is not an array")
            }
            for element in elements {
                guard case .string(let watched) = element else {
                    throw .invalidArgument("user_data 'watchlist' holds a value that is not a string")
                }
                watchlist.append(watched)
            }
        case .null?, nil:
            break
        case .string?:
            throw .invalidArgument("user_data 'watchlist' is not an array")
        }
        let info: String? =
            switch members["user_info"] {
            case .string(let s)?: JSONText.quoted(s)
            case .raw(let raw)?: raw
            case .null?, nil: nil
            }
        self.init(id: id, userInfo: info, watchlist: watchlist, userData: userData)
    }

    /// The `user_data` JSON for `id`, optional `userInfo` (JSON text) and `watchlist`.
    public static func userData(id: String, userInfo: String? = nil, watchlist: [String] = []) -> String {
        JSONText.object([
            ("id", JSONText.quoted(id)),
            ("user_info", userInfo),
            ("watchlist", watchlist.isEmpty ? nil : "[" + watchlist.map(JSONText.quoted).joined(separator: ",") + "]"),
        ])
    }

    /// The channel the server delivers this user's events on: `#server-to-user-<id>`.
    public var serverToUserChannel: String { UserID.serverToUserChannel(id) }
}

/// What a signed-in connection learns about users (``PusherClient/userUpdates()``).
public enum PusherUserUpdate: Sendable, Hashable {
    /// `pusher:signin_success`: the connection is signed in as this user (again after every
    /// reconnect).
    case signedIn(PusherUser)
    /// Signing in failed on this connection: the authenticator failed, the server refused the
    /// sign-in, or its answer was malformed. The client tries again on the next connection.
    case signInFailed(PusherError)
    /// An event sent to the signed-in user (`#server-to-user-<id>`, the HTTP API's `sendToUser`).
    case event(PusherEvent)
    /// Users of the watchlist came online or went offline (`pusher_internal:watchlist_events`).
    case watchlist(PusherWatchlistEvent)
}

/// One entry of `pusher_internal:watchlist_events`: these users came online or went offline.
public struct PusherWatchlistEvent: Sendable, Hashable {
    /// Online or offline.
    public enum Kind: String, Sendable, Hashable {
        case online
        case offline
    }

    /// What happened.
    public var kind: Kind
    /// To whom.
    public var userIDs: [String]

    /// An event from its parts.
    public init(kind: Kind, userIDs: [String]) {
        self.kind = kind
        self.userIDs = userIDs
    }
}
