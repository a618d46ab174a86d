import BridgeCore
import Logging
import PusherChannels

/// The clients a bridge's settings describe, for the CLI's one-shot commands.
public enum BridgeClients {
    /// The signed HTTP API client, or `nil` when the bridge has no `app_id` or secret.
    public static func httpClient(for settings: BridgeSettings, logger: Logger) throws -> PusherHTTPClient? {
        try ClientSettings.restClient(settings, logger: logger)
    }
}
