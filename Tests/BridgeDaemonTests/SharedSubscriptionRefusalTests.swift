import MosquittoClient
import Testing

@testable import BridgeDaemon

/// A refused `$share/…` subscription (SharedSubscriptionRefusal.swift): what the error line and
/// `/readyz` say. The refusal itself is seen end to end against ejabberd 23.01, whose CONNACK says
/// Shared Subscription Available = 0 (Tests/ejabberd/test_bridge_cluster.py); mosquitto grants
/// every shared subscription, so no Swift test here can make a real broker refuse one.
@Suite("SharedSubscriptionRefusal: the filter, the reason code and what to do")
struct SharedSubscriptionRefusalTests {
    static let notSupported = MQTTError(
        kind: .rejected, message: "broker refused the subscription: Shared Subscriptions not supported", code: 0x9E)

    @Test("0x9E: the broker has no shared subscriptions; the advice is partition mode")
    func notSupported() throws {
        let refusal = try #require(SharedSubscriptionRefusal(filter: "$share/factory/sensors/+", error: Self.notSupported))
        #expect(refusal.reasonCodeText == "0x9E")
        #expect(refusal.brokerLacksSharedSubscriptions)
        #expect(
            refusal.readinessProblem
                == "the broker refused the shared subscription $share/factory/sensors/+ (reason 0x9E: broker refused the "
                + "subscription: Shared Subscriptions not supported); this broker does not support shared subscriptions; "
                + "use [bridge.cluster] mqtt_to_pusher = \"partition\"")
    }

    @Test("another failure code (0x87 Not authorized): the ACL first, partition mode if the broker has none")
    func otherCode() throws {
        let error = MQTTError(kind: .rejected, message: "broker refused the subscription: Not authorized", code: 0x87)
        let refusal = try #require(SharedSubscriptionRefusal(filter: "$share/g/t", error: error))
        #expect(!refusal.brokerLacksSharedSubscriptions)
        #expect(refusal.reasonCodeText == "0x87")
        #expect(refusal.advice.hasPrefix("allow the client to subscribe to it on the broker (ACL)"))
        #expect(refusal.advice.hasSuffix("use [bridge.cluster] mqtt_to_pusher = \"partition\""))
        #expect(SharedSubscriptionRefusal(filter: "$share/g/t", reasonCode: 0x8, reason: "x").reasonCodeText == "0x08")
        #expect(SharedSubscriptionRefusal(filter: "$share/g/t", reasonCode: nil, reason: "x").reasonCodeText == "no reason code")
    }

    @Test("a plain filter, or an error that is no refusal (lost connection, shutdown), is no shared-subscription refusal")
    func notARefusal() {
        #expect(SharedSubscriptionRefusal(filter: "sensors/+", error: Self.notSupported) == nil)
        let lost = MQTTError(kind: .connectionLost, message: "connection lost", code: 7)
        #expect(SharedSubscriptionRefusal(filter: "$share/g/t", error: lost) == nil)
        #expect(SharedSubscriptionRefusal(filter: "$share/g/t", error: MQTTError(kind: .shutdown, message: "stopped")) == nil)
    }
}
