import MQTTVocabulary
import Testing

@Suite("MQTT vocabulary")
struct MQTTVocabularyTests {
    @Test func qosOrdersByItsWireValue() {
        #expect(MQTTQoS.atMostOnce < .atLeastOnce && MQTTQoS.atLeastOnce < .exactlyOnce)
        #expect(max(MQTTQoS.atLeastOnce, .atMostOnce) == .atLeastOnce)
        #expect(MQTTQoS(rawValue: 3) == nil)
    }

    @Test func protocolVersionIsTheConnectProtocolLevel() {
        #expect(MQTTProtocolVersion.v311.rawValue == 4)
        #expect(MQTTProtocolVersion.v5.rawValue == 5)
        #expect(MQTTProtocolVersion(rawValue: 3) == nil)
    }

    @Test func aPlainSubscriptionUsesNoMQTT5Option() {
        let plain = MQTTSubscription("sensors/#")
        #expect(plain.qos == .atLeastOnce)
        #expect(plain.retainHandling == .sendAlways)
        #expect(!plain.usesV5Options)
    }

    @Test(arguments: [
        MQTTSubscription("a/#", noLocal: true),
        MQTTSubscription("a/#", retainAsPublished: true),
        MQTTSubscription("a/#", retainHandling: .sendIfNew),
        MQTTSubscription("a/#", retainHandling: .never),
    ])
    func eachMQTT5OptionCounts(subscription: MQTTSubscription) {
        #expect(subscription.usesV5Options)
    }

    @Test func userPropertiesCompareByNameAndValue() {
        #expect(MQTTUserProperty("pusher-channel", "a") == MQTTUserProperty("pusher-channel", "a"))
        #expect(MQTTUserProperty("pusher-channel", "a") != MQTTUserProperty("pusher-event", "a"))
    }
}
