import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Locking
import Logging
import NIOCore
import NIOWebSocket
import PusherProtocol
import ServiceLifecycle
import Synchronization

/// Why pusher-local could not start.
public struct PusherLocalError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for a person.
    public let description: String
    init(_ description: String) { self.description = description }
}
