/// Syntax and classification of channel names.
public struct ChannelName: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    /// `private-encrypted-…` is checked before `private-…`.
    public var kind: ChannelKind {
        if rawValue.hasUTF8Prefix("private-encrypted-") { return .privateEncrypted }
        if rawValue.hasUTF8Prefix("private-") { return .private }
        if rawValue.hasUTF8Prefix("presence-") { return .presence }
        return .public
    }

    /// Cache channels replay their last event on subscribe: `cache-`, `private-cache-`,
    /// `private-encrypted-cache-`, `presence-cache-`.
    public var isCache: Bool {
        for prefix in ["cache-", "private-cache-", "private-encrypted-cache-", "presence-cache-"]
        where rawValue.hasUTF8Prefix(prefix) { return true }
        return false
    }

    /// Why this is not a valid channel name, or `nil` when it is:
    /// `^[A-Za-z0-9_\-=@,.;]+$`, at most 164 characters.
    public var problem: String? {
        Self.problem(with: rawValue)
    }

    /// Why `name` is not a valid channel name, or `nil` when it is.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "channel name is empty" }
        if name.utf8.count > PusherLimits.channelNameLength {
            return "channel name is longer than \(PusherLimits.channelNameLength) characters"
        }
        for byte in name.utf8 where !isChannelNameByte(byte) {
            let shown = byte < 0x80 ? String(UnicodeScalar(byte)) : "non-ASCII"
            return "channel name contains '\(shown)'; allowed are A-Z a-z 0-9 _ - = @ , . ;"
        }
        return nil
    }

    /// Whether `byte` may appear in a channel name.
    @inlinable
    public static func isChannelNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "="), UInt8(ascii: "@"),
            UInt8(ascii: ","), UInt8(ascii: "."), UInt8(ascii: ";"):
            return true
        default:
            return false
        }
    }
}
