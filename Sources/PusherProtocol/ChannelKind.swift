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
