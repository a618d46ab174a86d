extension StringProtocol {
    /// Whether the UTF-8 bytes of `self` start with those of `prefix`: how Pusher (JavaScript
    /// code units) and MQTT (bytes) compare names and topics. `hasPrefix` compares grapheme
    /// clusters instead, so `"client-\u{301}x".hasPrefix("client-")` is false: the `-` and the
    /// combining mark after it form one `Character`.
    @inlinable
    public func hasUTF8Prefix(_ prefix: some StringProtocol) -> Bool {
        utf8.starts(with: prefix.utf8)
    }
}
