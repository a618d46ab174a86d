import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What an authorizer is asked: may `socketID` subscribe to `channelName`?
public struct PusherAuthRequest: Sendable, Hashable {
    /// The current connection's socket id (auth is only valid for it).
    public var socketID: String
    /// The private, presence or encrypted channel.
    public var channelName: String

    /// A request from its parts.
    public init(socketID: String, channelName: String) {
        self.socketID = socketID
        self.channelName = channelName
    }

    /// The form body an auth endpoint receives: `socket_id=…&channel_name=…`.
    public var formBody: String {
        "socket_id=" + Self.formEncode(socketID) + "&channel_name=" + Self.formEncode(channelName)
    }

    /// `s` percent-encoded for a form body or a query: ASCII letters, digits and `-._*` stay, every
    /// other UTF-8 byte becomes `%XX` (upper-case hex).
    static func formEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// An authorization for one subscription: what `pusher:subscribe` carries.
public struct PusherChannelAuth: Sendable, Hashable {
    /// `KEY:signature` (docs/pusher-protocol.md §2 "Auth strings").
    public var auth: String
    /// For presence channels: the signed `channel_data` JSON string, sent byte for byte.
    public var channelData: String?
    /// For `private-encrypted-` channels: the 32-byte channel key (`shared_secret`).
    public var sharedSecret: [UInt8]?

    /// An authorization from its parts.
    public init(auth: String, channelData: String? = nil, sharedSecret: [UInt8]? = nil) {
        self.auth = auth
        self.channelData = channelData
        self.sharedSecret = sharedSecret
    }

    /// Decodes an auth endpoint's JSON reply `{"auth","channel_data"?,"shared_secret"?}`.
    public init(json: String) throws(PusherError) {
        let members: [String: JSONScanner.Value]
        do {
            members = try JSONScanner.object(json)
        } catch {
            throw .invalidArgument("auth response is not a JSON object: \(error)")
        }
        guard case .string(let auth)? = members["auth"] else {
            throw .invalidArgument("auth response has no string 'auth'")
        }
        self.auth = auth
        switch members["channel_data"] {
        case .string(let data)?: self.channelData = data
        case .raw(let raw)?: self.channelData = raw  // some endpoints send an object; sign-compatible only if unchanged
        case .null?, nil: self.channelData = nil
        }
        if case .string(let secret)? = members["shared_secret"] {
            guard let bytes = Data(base64Encoded: secret), bytes.count == SecretBox.keyBytes else {
                throw .invalidArgument("auth response 'shared_secret' is not 32 bytes of base64")
            }
            self.sharedSecret = Array(bytes)
        } else {
            self.sharedSecret = nil
        }
    }
}

/// Signs subscriptions in process with the app secret (PusherSwift's inline `PusherAuthMethod.inline`).
///
/// Only for trusted servers such as the bridge: the secret never leaves the process, and it can
/// derive encrypted channels' keys from the master key.
public struct PusherInlineSigner: Sendable {
    /// The app key (the part before `:` in auth strings).
    public var key: String
    /// The app secret.
    public var secret: String
    /// The presence identity (`user_id`); required to subscribe to presence channels.
    public var userID: String?
    /// The presence `user_info` as JSON text (e.g. `{"role":"bridge"}`); `nil` for none.
    public var userInfoJSON: String?
    /// The 32-byte encryption master key, for `private-encrypted-` channels.
    public var encryptionMasterKey: [UInt8]?

    /// A signer; `encryptionMasterKeyBase64` must decode to 32 bytes when given.
    public init(
        key: String,
        secret: String,
        userID: String? = nil,
        userInfoJSON: String? = nil,
        encryptionMasterKeyBase64: String? = nil
    ) throws(PusherError) {
        self.key = key
        self.secret = secret
        self.userID = userID
        self.userInfoJSON = userInfoJSON
        if let userInfoJSON {
            do {
                _ = try JSONScanner.object(userInfoJSON)
            } catch {
                throw .invalidArgument("user_info must be a JSON object: \(error)")
            }
        }
        if let encryptionMasterKeyBase64 {
            guard let bytes = Data(base64Encoded: encryptionMasterKeyBase64), bytes.count == 32 else {
                throw .invalidArgument("encryption master key must be 32 bytes, base64-encoded")
            }
            self.encryptionMasterKey = Array(bytes)
        } else {
            self.encryptionMasterKey = nil
        }
    }

    /// The `channel_data` this signer sends on presence channels, or `nil` without a user id.
    public var presenceChannelData: String? {
        guard let userID else { return nil }
        return JSONText.object([("user_id", JSONText.quoted(userID)), ("user_info", userInfoJSON)])
    }

    /// Signs `request` (docs/pusher-protocol.md §2): presence channels sign `channel_data` too, encrypted
    /// channels get `shared_secret` = SHA-256(channel ‖ master key).
    public func authorize(_ request: PusherAuthRequest) throws(PusherError) -> PusherChannelAuth {
        let channel = ChannelName(request.channelName)
        var channelData: String?
        var sharedSecret: [UInt8]?
        switch channel.kind {
        case .public:
            break
        case .private:
            break
        case .presence:
            guard let data = presenceChannelData else {
                throw .authorizationFailed(channel: request.channelName, message: "presence channels need a user id")
            }
            channelData = data
        case .privateEncrypted:
            guard let masterKey = encryptionMasterKey else {
                throw .authorizationFailed(channel: request.channelName, message: "encrypted channels need an encryption master key")
            }
            sharedSecret = PusherAuth.sharedSecret(channel: request.channelName, masterKey: masterKey)
        }
        let auth = PusherAuth.channelAuth(
            key: key,
            secret: secret,
            socketID: request.socketID,
            channel: request.channelName,
            channelData: channelData
        )
        return PusherChannelAuth(auth: auth, channelData: channelData, sharedSecret: sharedSecret)
    }
}

/// How the client authorizes private, presence and encrypted subscriptions — every mode
/// PusherSwift offers. Public channels never need it.
public enum PusherAuthorization: Sendable {
    /// No authorizer: only public channels (and channels given an auth at subscribe time).
    case none
    /// An auth endpoint: form POST `socket_id`, `channel_name` with `headers`, JSON reply
    /// `{"auth","channel_data"?,"shared_secret"?}` (PusherSwift `.endpoint`).
    case endpoint(url: String, headers: [String: String] = [:])
    /// Build the HTTP request yourself (PusherSwift `.authRequestBuilder`); the reply is decoded
    /// like an endpoint's.
    case requestBuilder(@Sendable (PusherAuthRequest) async throws -> PusherAuthEndpointRequest)
    /// Any async code returning the auth (PusherSwift `.authorizer`).
    case authorizer(@Sendable (PusherAuthRequest) async throws -> PusherChannelAuth)
    /// Sign in process with the app secret (PusherSwift `.inline`).
    case inline(PusherInlineSigner)
}
