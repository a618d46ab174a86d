import PusherProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
