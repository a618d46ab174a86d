import CSodium

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// NaCl secretbox (XSalsa20-Poly1305) through libsodium, for `private-encrypted-` channels
/// (docs/pusher-protocol.md §1 "Encrypted channels"). The only code in the package that touches CSodium.
public enum SecretBox {
    /// Key length (32 bytes).
    public static let keyBytes = Int(crypto_secretbox_KEYBYTES)
    /// Nonce length (24 bytes).
    public static let nonceBytes = Int(crypto_secretbox_NONCEBYTES)
    /// Authenticator length (16 bytes).
    public static let macBytes = Int(crypto_secretbox_MACBYTES)

    /// libsodium must be initialised once before use; `sodium_init` is thread-safe and idempotent.
    private static let initialised: Bool = sodium_init() >= 0

    /// Decrypts `ciphertext` (MAC included) with `key` and `nonce`; `nil` when the key is wrong,
    /// the data was tampered with, or a length is wrong.
    public static func open(ciphertext: [UInt8], nonce: [UInt8], key: [UInt8]) -> [UInt8]? {
        guard initialised, key.count == keyBytes, nonce.count == nonceBytes, ciphertext.count >= macBytes else {
            return nil
        }
        let length = ciphertext.count - macBytes
        // At least one byte so the buffer has an address even for an empty plaintext.
        var plaintext = [UInt8](repeating: 0, count: max(length, 1))
        let status = plaintext.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let base = out.baseAddress else { return -1 }
            return crypto_secretbox_open_easy(base, ciphertext, UInt64(ciphertext.count), nonce, key)
        }
        guard status == 0 else { return nil }
        return Array(plaintext.prefix(length))
    }

    /// Encrypts `plaintext`; the result carries the 16-byte MAC first, as `open` expects.
    public static func seal(plaintext: [UInt8], nonce: [UInt8], key: [UInt8]) -> [UInt8]? {
        guard initialised, key.count == keyBytes, nonce.count == nonceBytes else { return nil }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + macBytes)
        let status = ciphertext.withUnsafeMutableBufferPointer { out -> Int32 in
            guard let base = out.baseAddress else { return -1 }
            return crypto_secretbox_easy(base, plaintext, UInt64(plaintext.count), nonce, key)
        }
        return status == 0 ? ciphertext : nil
    }

    /// A random 24-byte nonce.
    public static func randomNonce() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<nonceBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Decrypts an encrypted channel's event `data` (`{"nonce":"<b64>","ciphertext":"<b64>"}`)
    /// into its UTF-8 plaintext; `nil` when the data is not in that form or does not decrypt.
    public static func openEventData(_ data: String, key: [UInt8]) -> String? {
        guard let members = try? JSONScanner.object(data),
            case .string(let nonceText)? = members["nonce"],
            case .string(let cipherText)? = members["ciphertext"],
            let nonce = Data(base64Encoded: nonceText),
            let ciphertext = Data(base64Encoded: cipherText),
            let plaintext = open(ciphertext: Array(ciphertext), nonce: Array(nonce), key: key)
        else { return nil }
        return String(validating: plaintext, as: UTF8.self)
    }

    /// Encrypts `plaintext` into the wire form `{"nonce","ciphertext"}` (for servers and tests).
    public static func sealEventData(_ plaintext: String, key: [UInt8], nonce: [UInt8] = randomNonce()) -> String? {
        guard let sealed = seal(plaintext: Array(plaintext.utf8), nonce: nonce, key: key) else { return nil }
        return JSONText.object([
            ("nonce", JSONText.quoted(Data(nonce).base64EncodedString())),
            ("ciphertext", JSONText.quoted(Data(sealed).base64EncodedString())),
        ])
    }
}
