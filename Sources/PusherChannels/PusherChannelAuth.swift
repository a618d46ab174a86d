import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
