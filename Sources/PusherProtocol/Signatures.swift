import Crypto

/// Channel and user authorization strings (docs/pusher-protocol.md §2, "Auth strings").
///
/// An auth string is `KEY:` followed by the lower-case hex HMAC-SHA256 of a string to sign:
///
/// | what | string to sign |
/// |---|---|
/// | private, private-encrypted channel | `socket_id:channel` |
/// | presence channel | `socket_id:channel:channel_data` (the exact bytes sent) |
/// | user sign-in | `socket_id::user::user_data` |
public enum PusherAuth {
    /// The auth string for subscribing `socketID` to `channel`; pass `channelData` for presence
    /// channels — it is signed byte for byte, so send exactly this string.
    public static func channelAuth(
        key: String,
        secret: String,
        socketID: String,
        channel: String,
        channelData: String? = nil
    ) -> String {
        key + ":"
            + hmacSHA256Hex(secret: secret, message: channelStringToSign(socketID: socketID, channel: channel, channelData: channelData))
    }

    /// `socket_id:channel` or `socket_id:channel:channel_data`.
    public static func channelStringToSign(socketID: String, channel: String, channelData: String?) -> String {
        if let channelData { return socketID + ":" + channel + ":" + channelData }
        return socketID + ":" + channel
    }

    /// The auth string for `pusher:signin` with `userData` (a JSON string, signed byte for byte).
    public static func userAuth(key: String, secret: String, socketID: String, userData: String) -> String {
        key + ":" + hmacSHA256Hex(secret: secret, message: socketID + "::user::" + userData)
    }

    /// Whether `auth` is the right auth string for this subscription. Compares in constant time.
    public static func verifyChannelAuth(
        _ auth: String,
        key: String,
        secret: String,
        socketID: String,
        channel: String,
        channelData: String?
    ) -> Bool {
        let expected = channelAuth(key: key, secret: secret, socketID: socketID, channel: channel, channelData: channelData)
        return constantTimeEqual(auth, expected)
    }

    /// The key of a `private-encrypted-` channel: SHA-256(channel name ‖ 32-byte master key).
    /// Sent base64-encoded as `shared_secret` in the auth response (docs/pusher-protocol.md §1).
    public static func sharedSecret(channel: String, masterKey: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: Array(channel.utf8))
        hasher.update(data: Array(masterKey))
        return Array(hasher.finalize())
    }
}

/// Lower-case hex HMAC-SHA256 of `message` keyed with `secret`.
public func hmacSHA256Hex(secret: String, message: String) -> String {
    hmacSHA256Hex(secret: secret, message: Array(message.utf8))
}

/// Lower-case hex HMAC-SHA256 of `message` bytes keyed with `secret`.
public func hmacSHA256Hex(secret: String, message: [UInt8]) -> String {
    let key = SymmetricKey(data: Array(secret.utf8))
    return hexString(HMAC<SHA256>.authenticationCode(for: message, using: key))
}

/// Lower-case hex MD5 of `bytes` (the HTTP API's `body_md5`).
public func md5Hex(_ bytes: some Sequence<UInt8>) -> String {
    hexString(Insecure.MD5.hash(data: Array(bytes)))
}

/// Compares two strings in time that depends only on their lengths, for signature checks.
public func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for i in x.indices { difference |= x[i] ^ y[i] }
    return difference == 0
}

private let hexDigits = Array("0123456789abcdef".utf8)

func hexString(_ bytes: some Sequence<UInt8>) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(64)
    for byte in bytes {
        out.append(hexDigits[Int(byte >> 4)])
        out.append(hexDigits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
