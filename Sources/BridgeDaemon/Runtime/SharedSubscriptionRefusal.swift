import MosquittoClient

/// A shared subscription (`$share/<group>/<filter>`: a cluster's MQTT → Pusher rules, docs/contract.md
/// §7.4) that the broker refused: a SUBACK failure code, or, when its CONNACK said Shared Subscription
/// Available = 0, not sent at all (the client's reason 0x9E; ejabberd 23.01 would end the connection
/// over it, docs/brokers.md). The rule receives nothing from MQTT until an operator acts, so the
/// bridge logs an error naming the filter, the reason and what to do, counts it in
/// `errors_total{kind="subscribe"}`, and `/readyz` says it (BridgeRuntime+Connections.swift).
struct SharedSubscriptionRefusal: Sendable, Equatable {
    /// The filter as subscribed, `$share/<group>/<filter>`.
    let filter: String
    /// The MQTT 5 reason code (≥ 0x80), when the error has one.
    let reasonCode: Int?
    /// The error in words.
    let reason: String

    /// The refusal in `error` of a subscription to `filter`; nil for a plain filter (not shared), or an
    /// error that is no refusal (the client stopping, a lost connection: the client subscribes again).
    init?(filter: String, error: any Error) {
        guard filter.hasPrefix("$share/"), let error = error as? MQTTError, error.kind == .rejected else { return nil }
        self.filter = filter
        self.reasonCode = error.code
        self.reason = error.message
    }

    init(filter: String, reasonCode: Int?, reason: String) {
        self.filter = filter
        self.reasonCode = reasonCode
        self.reason = reason
    }

    /// 0x9E (Shared Subscriptions not supported): the broker has none. Other codes (0x87 Not
    /// authorized, 0x80 Unspecified error, …) may be its policy for this one filter.
    var brokerLacksSharedSubscriptions: Bool { reasonCode == 0x9E }

    /// What the operator should do.
    var advice: String {
        let partition = "use [bridge.cluster] mqtt_to_pusher = \"partition\""
        if brokerLacksSharedSubscriptions { return "this broker does not support shared subscriptions; \(partition)" }
        return
            "allow the client to subscribe to it on the broker (ACL), or, if this broker does not support shared subscriptions, \(partition)"
    }

    /// The code as MQTT writes it, `0x9E`; `no reason code` without one.
    var reasonCodeText: String {
        guard let reasonCode else { return "no reason code" }
        let hex = String(reasonCode, radix: 16, uppercase: true)
        return "0x" + (hex.count < 2 ? "0" + hex : hex)
    }

    /// The `/readyz` line (the bridge's name goes before it).
    var readinessProblem: String {
        "the broker refused the shared subscription \(filter) (reason \(reasonCodeText): \(reason)); \(advice)"
    }
}
