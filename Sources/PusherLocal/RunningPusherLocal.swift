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

/// A started pusher-local: its address, and in-process versions of the control endpoints.
public struct RunningPusherLocal: Sendable {
    /// The bound host.
    public let host: String
    /// The ACTUAL bound port (also when the configuration said 0).
    public let port: Int
    /// The configuration it runs with.
    public let configuration: PusherLocalConfiguration
    let registry: AppRegistry

    /// `ws://HOST:PORT/app/KEY?protocol=7` (`wss://` with TLS) for the first app, or for `app`.
    public func webSocketURL(key: String? = nil) -> String {
        (configuration.tls == nil ? "ws" : "wss") + "://\(host):\(port)/app/\(key ?? configuration.apps[0].key)?protocol=7"
    }

    /// `http://HOST:PORT` (`https://` with TLS).
    public var httpURL: String { (configuration.tls == nil ? "http" : "https") + "://\(host):\(port)" }

    /// The first configured app.
    public var app: PusherLocalApp { configuration.apps[0] }

    /// Closes every connection of the app with `code` (e.g. 4200, 4100, 4001); returns how many.
    @discardableResult
    public func disconnectAll(appID: String? = nil, code: UInt16, reason: String = "closed by pusher-local control") -> Int {
        live(appID).map { AppControl(live: $0).disconnectAll(code: code, reason: reason) } ?? 0
    }

    /// Closes the one connection of the app whose Pusher socket id is `socketID` with `code`;
    /// false when no open connection has it.
    @discardableResult
    public func disconnect(appID: String? = nil, socketID: String, code: UInt16, reason: String = "closed by pusher-local control")
        -> Bool
    {
        live(appID).map { AppControl(live: $0).disconnect(socketID: socketID, code: code, reason: reason) } ?? false
    }

    /// Sends `bytes` as one raw text frame (even malformed JSON or invalid UTF-8) to every
    /// connection; returns how many.
    @discardableResult
    public func sendRaw(appID: String? = nil, _ bytes: [UInt8]) -> Int {
        live(appID).map { AppControl(live: $0).sendRaw(bytes) } ?? 0
    }

    /// Sends `text` as one raw text frame to every connection; returns how many.
    @discardableResult
    public func sendRaw(appID: String? = nil, _ text: String) -> Int {
        sendRaw(appID: appID, Array(text.utf8))
    }

    /// Whether `pusher:ping` is answered (false provokes client pong timeouts).
    public func setAnswersPings(appID: String? = nil, _ answer: Bool) {
        live(appID)?.state.withLock { $0.faults.answerPings = answer }
    }

    /// Accept-then-close every new connection with `code` (e.g. 4001 to emulate a refusal loop);
    /// `nil` accepts again.
    public func refuseConnections(appID: String? = nil, code: UInt16?, reason: String = "refused by pusher-local control") {
        live(appID)?.state.withLock { state in
            state.faults.refusal = code.map { ($0, reason) }
        }
    }

    /// Publishes an event as the HTTP API would (validated, not signed).
    public func publish(appID: String? = nil, _ request: PublishRequest) throws(APIError) {
        guard let live = live(appID) else { throw APIError(status: 404, message: "Unknown app") }
        if let error = AppHub.validate(request) { throw error }
        let now = ContinuousClock.now
        live.perform { state in ((), state.hub.publish(request, now: now)) }
    }

    /// The app's counters and occupancy.
    public func stats(appID: String? = nil) -> PusherLocalStats? {
        live(appID)?.stats()
    }

    func live(_ appID: String?) -> LiveApp? {
        guard let appID else { return registry.apps.first }
        return registry.byID[appID]
    }
}
