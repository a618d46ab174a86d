import Locking
import Logging
import NIOCore
import PusherProtocol

/// What the writer of one connection sends, in order.
enum OutboundItem: Sendable {
    /// A text frame, already encoded (shared by every recipient of a publish).
    case text(ByteBuffer)
    /// A close frame with a Pusher close code; nothing is sent after it.
    case close(code: UInt16, reason: String)
}
