import PusherProtocol

/// Topic text the way an MQTT broker reads it: levels split at every `/` byte, compared byte for
/// byte (MQTT §4.7.3: no normalisation).
///
/// Swift's `String` does neither. It splits by grapheme cluster, so a `/` followed by a combining
/// mark is one `Character` and `split(separator: "/")` misses it; `hasPrefix("$")` is false for
/// `"$\u{59C}"` for the same reason; and `==` and hashing use canonical equivalence, so `"é"`
/// equals `"e\u{301}"` though a broker treats them as different topics. Found by the `topic` fuzz
/// target: its reference matcher and the rule table disagreed on `"$\u{59C}"` against `#`.
enum MQTTTopicText {
    /// The levels of `text`, split at every `/` byte (empty levels kept).
    static func levels(_ text: String) -> [Substring] {
        let bytes = text.utf8
        var levels: [Substring] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "/") {
                levels.append(Substring(bytes[start..<index]))
                start = bytes.index(after: index)
            }
            bytes.formIndex(after: &index)
        }
        levels.append(Substring(bytes[start..<bytes.endIndex]))
        return levels
    }

    /// Whether `text` starts with the byte `$` (broker-reserved topics, MQTT §4.7.2).
    static func isReserved(_ text: some StringProtocol) -> Bool {
        text.hasUTF8Prefix("$")
    }

    /// Whether `text` holds a `+` or `#` byte anywhere.
    static func containsWildcard(_ text: some StringProtocol) -> Bool {
        text.utf8.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }
    }

    /// Whether two levels (or topics) are the same bytes.
    static func same(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
        a.utf8.elementsEqual(b.utf8)
    }

    /// A level as a dictionary key that hashes and compares its bytes.
    struct Key: Hashable, Sendable {
        let text: Substring

        init(_ text: Substring) { self.text = text }

        static func == (lhs: Key, rhs: Key) -> Bool { MQTTTopicText.same(lhs.text, rhs.text) }

        func hash(into hasher: inout Hasher) {
            let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            if hashed == nil {
                for byte in text.utf8 { hasher.combine(byte) }
            }
        }
    }
}
