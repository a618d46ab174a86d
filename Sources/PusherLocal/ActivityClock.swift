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

/// The keep-alive state of one connection, shared by its reader (activity) and timer tasks.
final class ActivityClock: Sendable {
    let state: Locked<ActivityMonitor>
    init(_ monitor: ActivityMonitor) { state = Locked(monitor) }
}
