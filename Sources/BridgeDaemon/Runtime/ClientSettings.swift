import Backoff
import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient
import PusherChannels

/// A bridge's settings as the two clients' configurations.
enum ClientSettings {
    static func pusherOptions(_ settings: BridgeSettings) throws -> PusherClientOptions {
        let p = settings.pusher
        let authorization: PusherAuthorization
        if let endpoint = p.authEndpoint {
            authorization = .endpoint(url: endpoint, headers: p.authHeaders)
        } else if let secret = p.secret {
            authorization = .inline(
                try PusherInlineSigner(
                    key: p.key, secret: secret.value, userID: p.userID, userInfoJSON: p.userInfoJSON,
                    encryptionMasterKeyBase64: p.encryptionMasterKey?.value))
        } else {
            authorization = .none
        }
        return PusherClientOptions(
            key: p.key,
            host: p.cluster.map { .cluster($0) } ?? .host(p.host, port: p.port),
            encrypted: p.useTLS,
            caFile: p.caFile,
            activityTimeout: p.activityTimeout,
            pongTimeout: p.pongTimeout,
            reconnectPolicy: settings.reconnect,
            authorization: authorization
        )
    }

    static func restClient(_ settings: BridgeSettings, logger: Logger) throws -> PusherHTTPClient? {
        let p = settings.pusher
        guard let appID = p.appID, let secret = p.secret else { return nil }
        // Events for private-encrypted- channels are encrypted with the channel's key, derived
        // from the master key (docs/pusher-protocol.md §1, "Encrypted channels").
        var masterKey: [UInt8]?
        if let base64 = p.encryptionMasterKey?.value {
            masterKey = try PusherInlineSigner(key: p.key, secret: secret.value, encryptionMasterKeyBase64: base64).encryptionMasterKey
        }
        return PusherHTTPClient(
            appID: appID, key: p.key, secret: secret.value,
            host: p.cluster.map { .cluster($0) } ?? .host(p.restHost, port: p.restPort),
            encrypted: p.useTLS, caFile: p.caFile, maxEventBytes: p.maxEventBytes, encryptionMasterKey: masterKey, logger: logger
        )
    }

    /// - Parameter willUserProperties: in a cluster, the member's incarnation and start, so that the
    ///   Will tells which process's record it deletes (BridgeCluster).
    static func mqttConfiguration(_ settings: BridgeSettings, willUserProperties: [MQTTUserProperty] = []) -> MQTTConfiguration {
        let m = settings.mqtt
        let backpressure = settings.mqttToPusherOverflow == .backpressure
        var tls: MQTTTLSConfiguration?
        if m.useTLS {
            tls = MQTTTLSConfiguration(caFile: m.caFile, certificateFile: m.certFile, keyFile: m.keyFile, insecure: m.tlsInsecure)
        }
        return MQTTConfiguration(
            // In a cluster `client_id-<instance>` (docs/contract.md §7.4): each member its own session.
            host: m.host, port: m.port, clientID: settings.effectiveMQTTClientID,
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
}
