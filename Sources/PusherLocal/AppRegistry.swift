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

/// The apps of a running server, looked up by id (HTTP API) or key (WebSocket path).
final class AppRegistry: Sendable {
    let byID: [String: LiveApp]
    let byKey: [String: LiveApp]
    let apps: [LiveApp]
    private let nextConnection = Atomic<UInt64>(1)

    init(configuration: PusherLocalConfiguration, webhooks: WebhookSender?, logger: Logger) {
        let seconds = Int(configuration.activityTimeout.components.seconds)
        let apps = configuration.apps.map {
            LiveApp(
                app: $0, activityTimeoutSeconds: seconds, subscriptionCountEvents: configuration.subscriptionCountEvents,
                users: configuration.userSettings(appID: $0.id),
                webhooks: webhooks,
                logger: logger)
        }
        self.apps = apps
        self.byID = Dictionary(apps.map { ($0.app.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.byKey = Dictionary(apps.map { ($0.app.key, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func makeConnectionID() -> ConnectionID {
        ConnectionID(nextConnection.wrappingAdd(1, ordering: .relaxed).oldValue)
    }
}
