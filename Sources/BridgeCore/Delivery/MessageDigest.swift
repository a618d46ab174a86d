import Crypto

/// A 128-bit identity of a message, the first 16 bytes of a SHA-256 over its parts.
///
/// Used by ``LoopGuard`` (topic + payload of our own publishes) and ``DuplicateFilter``
/// (direction + channel/topic + payload). 128 bits make an accidental collision between two
/// different messages practically impossible (birthday bound ≈ 2^64 messages), while keeping
/// each remembered message at 16 bytes. Each part is length-prefixed before hashing so that
/// ("ab", "c") and ("a", "bc") give different digests.
public struct MessageDigest: Hashable, Sendable, CustomStringConvertible {
    /// First 8 bytes of the SHA-256, big-endian.
    public let high: UInt64
    /// Bytes 8..<16 of the SHA-256, big-endian.
    public let low: UInt64

    /// Digest of a sequence of byte strings (for example `[topic, payload]`).
    public init(parts: [[UInt8]]) {
        var hasher = SHA256()
        for part in parts {
            var length = UInt64(part.count).littleEndian
            withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
            part.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        }
        let digest = hasher.finalize()
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in digest.prefix(16).enumerated() {
            if index < 8 {
                high = high << 8 | UInt64(byte)
            } else {
                low = low << 8 | UInt64(byte)
            }
        }
        self.high = high
        self.low = low
    }

    /// Digest of an MQTT message as the broker routes it: its topic and its payload bytes.
    public init(topic: String, payload: [UInt8]) {
        self.init(parts: [Array(topic.utf8), payload])
    }

    /// 32 lower-case hex digits.
    public var description: String {
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex(high) + hex(low)
    }
}
