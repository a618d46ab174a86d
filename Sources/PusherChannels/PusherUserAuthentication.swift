import PusherProtocol

/// How the client obtains the auth for `pusher:signin` (``PusherClient/signIn()``): pusher-js's
/// `userAuthentication`, plus in-process signing for trusted servers.
public enum PusherUserAuthentication: Sendable {
    /// No sign-in.
    case none
    /// A user authentication endpoint: form POST `socket_id` with `headers` (and `params`, sent
    /// as further form fields), JSON reply `{"auth","user_data"}`.
    case endpoint(url: String, headers: [String: String] = [:], params: [String: String] = [:])
    /// Any async code returning the auth for a socket id.
    case authenticator(@Sendable (_ socketID: String) async throws -> PusherUserAuth)
    /// Sign `userData` in process with the app secret (see ``PusherUser/userData(id:userInfo:watchlist:)``).
    case inline(PusherInlineSigner, userData: String)
}

/// What `pusher:signin` carries: the auth string and the `user_data` it signs.
public struct PusherUserAuth: Sendable, Hashable {
    /// `KEY:HMAC-SHA256(secret, "<socket_id>::user::<user_data>")` (docs/pusher-protocol.md §2).
    public var auth: String
    /// The `user_data` JSON string, sent byte for byte.
    public var userData: String

    /// An auth from its parts.
    public init(auth: String, userData: String) {
        self.auth = auth
        self.userData = userData
    }

    /// Decodes a user authentication endpoint's reply `{"auth","user_data"}`.
    public init(json: String) throws(PusherError) {
        let members: [String: JSONScanner.Value]
        do {
            members = try JSONScanner.object(json)
        } catch {
            throw .invalidArgument("user auth response is not a JSON object: \(error)")
        }
        guard case .string(let auth)? = members["auth"] else {
            throw .invalidArgument("user auth response has no string 'auth'")
        }
        guard case .string(let userData)? = members["user_data"] else {
            throw .invalidArgument("user auth response has no string 'user_data'")
        }
        self.init(auth: auth, userData: userData)
    }
}

extension PusherInlineSigner {
    /// Signs `userData` for connection `socketID` (`pusher:signin`).
    public func signIn(socketID: String, userData: String) -> PusherUserAuth {
        PusherUserAuth(auth: PusherAuth.userAuth(key: key, secret: secret, socketID: socketID, userData: userData), userData: userData)
    }
}
