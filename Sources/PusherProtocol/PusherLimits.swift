/// Pusher's published limits (docs/pusher-protocol.md §1 "Names and sizes", §2).
public enum PusherLimits {
    /// Longest channel name.
    public static let channelNameLength = 164
    /// Longest event name.
    public static let eventNameLength = 200
    /// Largest event `data`, in bytes (HTTP 413 beyond).
    public static let eventDataBytes = 10 * 1024
    /// Most channels one `POST /events` may name.
    public static let channelsPerTrigger = 100
    /// Most events in one `POST /batch_events`.
    public static let batchSize = 10
    /// Most members a presence channel lists.
    public static let presenceMembers = 100
    /// Largest presence `user_info`, in bytes.
    public static let userInfoBytes = 1000
    /// Longest presence `user_id`.
    public static let userIDLength = 128
    /// Client events one connection may send per second (over → 4301).
    public static let clientEventsPerSecond = 10
}

/// The kind of a channel, decided by its name's prefix.
public enum ChannelKind: Sendable, Hashable {
    case `public`
    /// `private-`: needs auth.
    case `private`
    /// `presence-`: needs auth with `channel_data`; members are tracked.
    case presence
    /// `private-encrypted-`: needs auth; event data is NaCl secretbox ciphertext.
    case privateEncrypted

    /// Whether subscribing needs an auth string.
    public var requiresAuth: Bool { self != .public }
    /// Whether client events (`client-*`) are allowed (private and presence only, not encrypted).
    public var allowsClientEvents: Bool { self == .private || self == .presence }
}

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

/// Syntax of event names.
public enum EventName {
    /// Why `name` cannot be published as an application event, or `nil` when it can:
    /// non-empty, at most 200 characters, not a protocol name (`pusher:`, `pusher_internal:`).
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "event name is empty" }
        if name.utf8.count > PusherLimits.eventNameLength {
            return "event name is longer than \(PusherLimits.eventNameLength) characters"
        }
        if isProtocolEvent(name) { return "event names starting with 'pusher:' are reserved" }
        return nil
    }

    /// `pusher:` and `pusher_internal:` events belong to the protocol, not the application.
    public static func isProtocolEvent(_ name: String) -> Bool {
        name.hasUTF8Prefix("pusher:") || name.hasUTF8Prefix("pusher_internal:")
    }

    /// Client events are named `client-*`.
    public static func isClientEvent(_ name: String) -> Bool {
        name.hasUTF8Prefix("client-")
    }
}

/// Socket ids look like `123.456` (digits, a dot, digits).
public enum SocketID {
    public static func isValid(_ id: String) -> Bool {
        let parts = id.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
    }
}

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
