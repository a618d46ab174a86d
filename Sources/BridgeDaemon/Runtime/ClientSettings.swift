import Backoff
import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient
import PusherChannels
import PusherProtocol

/// Settings that one of a bridge's clients refuses when the bridge starts: an invalid config
/// (exit 78, docs/contract.md §3), not a run-time failure. The config loader checks the same
/// limits (`MQTTClientLimits`, `PusherClientLimits`), so `check` refuses such a file first and
/// this is only what slipped past it (Tests/BridgeDaemonTests/StartValidationTests.swift looks
/// for such slips, key by key).
public struct ClientSettingsRefused: Error, CustomStringConvertible {
    /// The bridge whose settings were refused.
    public var bridge: String
    /// The client's words.
    public var message: String

    public var description: String { "bridge \(bridge): \(message)" }
}

/// A bridge's settings as the two clients' configurations, and the clients made from them: what
/// `BridgeRuntime` starts with (and `tap`, `trigger`).
enum ClientSettings {
    static func pusherOptions(_ settings: BridgeSettings) throws(ClientSettingsRefused) -> PusherClientOptions {
        let p = settings.pusher
        let authorization: PusherAuthorization
        if let endpoint = p.authEndpoint {
            authorization = .endpoint(url: endpoint, headers: p.authHeaders)
        } else if let secret = p.secret {
            authorization = .inline(
                try signer(
                    settings, key: p.key, secret: secret.value, userID: p.userID, userInfoJSON: p.userInfoJSON,
                    encryptionMasterKeyBase64: p.encryptionMasterKey?.value))
        } else {
            authorization = .none
        }
        // Sign-in (docs/contract.md §8.2): the endpoint chooses the user, else the secret signs
        // user_id with its user_info and watchlist.
        var userAuthentication = PusherUserAuthentication.none
        if p.signIn {
            if let endpoint = p.userAuthEndpoint {
                userAuthentication = .endpoint(url: endpoint, headers: p.authHeaders)
            } else if let secret = p.secret, let userID = p.userID {
                let userData = PusherUser.userData(id: userID, userInfo: p.userInfoJSON, watchlist: p.watchlist)
                userAuthentication = .inline(
                    try signer(settings, key: p.key, secret: secret.value, encryptionMasterKeyBase64: nil), userData: userData)
            }
        }
        let options = PusherClientOptions(
            key: p.key,
            host: p.cluster.map { .cluster($0) } ?? .host(p.host, port: p.port),
            encrypted: p.useTLS,
            caFile: p.caFile,
            activityTimeout: p.activityTimeout,
            pongTimeout: p.pongTimeout,
            reconnectPolicy: settings.reconnect,
            authorization: authorization,
            userAuthentication: userAuthentication
        )
        let problems = options.problems
        guard problems.isEmpty else {
            throw ClientSettingsRefused(
                bridge: settings.name, message: "invalid Pusher configuration: " + problems.joined(separator: "; "))
        }
        return options
    }

    static func restClient(_ settings: BridgeSettings, logger: Logger) throws(ClientSettingsRefused) -> PusherHTTPClient? {
        let p = settings.pusher
        guard let appID = p.appID, let secret = p.secret else { return nil }
        if let problem = PusherClientLimits.portProblem(p.restPort) {
            throw ClientSettingsRefused(bridge: settings.name, message: "invalid Pusher configuration: rest_port \(problem)")
        }
        // Events for private-encrypted- channels are encrypted with the channel's key, derived
        // from the master key (docs/pusher-protocol.md §1, "Encrypted channels").
        var masterKey: [UInt8]?
        if let base64 = p.encryptionMasterKey?.value {
            masterKey = try signer(settings, key: p.key, secret: secret.value, encryptionMasterKeyBase64: base64).encryptionMasterKey
        }
        return PusherHTTPClient(
            appID: appID, key: p.key, secret: secret.value,
            host: p.cluster.map { .cluster($0) } ?? .host(p.restHost, port: p.restPort),
            encrypted: p.useTLS, caFile: p.caFile, maxEventBytes: p.maxEventBytes, encryptionMasterKey: masterKey, logger: logger
        )
    }

    /// The MQTT client, made (not connected) as the bridge starts it. Throws
    /// ``ClientSettingsRefused`` for `MQTTConfiguration.problems` and options libmosquitto refuses
    /// (a TLS file it cannot open, …), the `MQTTError` when the library itself fails.
    static func mqttClient(_ settings: BridgeSettings, willUserProperties: [MQTTUserProperty] = [], logger: Logger) throws -> MQTTClient {
        let configuration = mqttConfiguration(settings, willUserProperties: willUserProperties)
        // The topics every bridge publishes to (the loader checks them too): one the client refuses
        // would fail on every publish.
        for topic in settings.fixedMQTTTopics {
            guard let problem = MQTTClientLimits.topicNameProblem(topic) else { continue }
            let shown = topic.utf8.count > 80 ? "\(topic.prefix(60))… (\(topic.utf8.count) bytes)" : topic
            throw ClientSettingsRefused(bridge: settings.name, message: "invalid MQTT configuration: topic \"\(shown)\" \(problem)")
        }
        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: configuration, logger: logger)
        } catch {
            guard error.kind == .invalidConfiguration else { throw error }
            throw ClientSettingsRefused(bridge: settings.name, message: "\(error)")
        }
        return client
    }

    /// - Parameter willUserProperties: in a cluster, the member's incarnation and start, so that the
    ///   Will tells which process's record it deletes (SupervisedCluster.willUserProperties).
    static func mqttConfiguration(_ settings: BridgeSettings, willUserProperties: [MQTTUserProperty] = []) -> MQTTConfiguration {
        let m = settings.mqtt
        let backpressure = settings.mqttToPusherOverflow == .backpressure
        var tls: MQTTTLSConfiguration?
        if m.useTLS {
            tls = MQTTTLSConfiguration(caFile: m.caFile, certificateFile: m.certFile, keyFile: m.keyFile, insecure: m.tlsInsecure)
        }
        return MQTTConfiguration(
            // In a cluster `client_id-<instance>` (docs/contract.md §7.4): each member its own session.
            host: m.host, port: m.port, failover: m.failover,
            clientID: settings.effectiveMQTTClientID,
            protocolVersion: m.protocolVersion,
            cleanSession: m.cleanSession, sessionExpiry: m.sessionExpiry, keepAlive: m.keepalive,
            username: m.username, password: m.password?.value, tls: tls,
            // Alone: `offline` on the status topic; in a cluster the deletion of the member record.
            will: MQTTWill(
                topic: settings.lastWill.topic, payload: settings.lastWill.payload, qos: .atLeastOnce, retain: true,
                userProperties: willUserProperties),
            reconnect: settings.reconnect,
            // `backpressure` (docs/contract.md §7.6): the client never drops, it stops reading
            // from the broker while a quarter of `[bridge.buffer]` (at most 10,000 messages and
            // 16 MiB) waits for the outbox; the outbox itself is bounded by `[bridge.buffer]`.
            messageBufferSize: backpressure ? min(10_000, max(settings.buffer.maxMessages / 4, 16)) : 10_000,
            messageBufferBytes: min(16 * 1024 * 1024, max(settings.buffer.maxBytes / 4, 64 * 1024)),
            incomingOverflow: backpressure ? .pauseReading : .dropAfterTimeout,
            // While the consumer is stuck, libmosquitto's thread blocks and sends no PINGREQ: stay
            // well inside the keepalive, or the broker drops us (seen in the issue 7 benchmark
            // with keepalive 5 s against the former fixed 5 s).
            backpressureTimeout: min(.seconds(5), m.keepalive / 2)
        )
    }

    /// The signer, its refusal (`PusherError.invalidArgument`) as the bridge's.
    private static func signer(
        _ settings: BridgeSettings, key: String, secret: String, userID: String? = nil, userInfoJSON: String? = nil,
        encryptionMasterKeyBase64: String?
    ) throws(ClientSettingsRefused) -> PusherInlineSigner {
        do {
            return try PusherInlineSigner(
                key: key, secret: secret, userID: userID, userInfoJSON: userInfoJSON, encryptionMasterKeyBase64: encryptionMasterKeyBase64)
        } catch {
            throw ClientSettingsRefused(bridge: settings.name, message: "invalid Pusher configuration: \(error)")
        }
    }
}
