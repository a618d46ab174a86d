import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// `[bridge.buffer]`: bounds of the per-direction buffer while the far side is down.
public struct BufferSettings: Sendable, Equatable {
    /// `max_messages`, default 100,000.
    public var maxMessages: Int
    /// `max_bytes`, default 64 MiB.
    public var maxBytes: Int
    /// `overflow` as the file says it; `nil` when the key is absent (then each direction takes
    /// its default, see ``BridgeSettings/mqttToPusherOverflow``).
    public var overflowSetting: BufferOverflowPolicy?
    /// `persist`, default true: spool to `state_dir`.
    public var persist: Bool

    /// `overflow` as written, `drop-oldest` when absent.
    public var overflow: BufferOverflowPolicy {
        get { overflowSetting ?? .dropOldest }
        set { overflowSetting = newValue }
    }

    public init(
        maxMessages: Int = 100_000, maxBytes: Int = 64 * 1024 * 1024, overflow: BufferOverflowPolicy? = nil, persist: Bool = true
    ) {
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
        self.overflowSetting = overflow
        self.persist = persist
    }
}
