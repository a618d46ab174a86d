import Testing

@testable import BridgeCore

/// `[bridge.buffer] overflow` per direction (docs/contract.md §4, §7.6).
@Suite("Buffer overflow policy per direction")
struct BufferOverflowDefaultsTests {
    private static let head = "[[bridge]]\nname = \"b\"\n[bridge.pusher]\nkey = \"k\"\napp_id = \"1\"\nsecret = \"s\"\n"

    private static func mqttRule(_ name: String, qos: Int) -> String {
        "[[bridge.rule]]\nname = \"\(name)\"\nfrom = \"mqtt\"\ntopic = \"\(name)/+\"\nchannel = \"c-{1}\"\nevent = \"e\"\nqos = \(qos)\n"
    }

    private static func bridge(buffer: String = "", rules: [String]) throws -> BridgeSettings {
        let text = head + (buffer.isEmpty ? "" : "[bridge.buffer]\n\(buffer)\n") + rules.joined()
        return try #require(try Fixture.parse(text).bridges.first)
    }

    @Test func aRuleReadingQoS1MakesBackpressureTheMQTTToPusherDefault() throws {
        let bridge = try Self.bridge(rules: [Self.mqttRule("a", qos: 0), Self.mqttRule("b", qos: 1)])
        #expect(bridge.buffer.overflowSetting == nil)
        #expect(bridge.mqttToPusherOverflow == .backpressure)
        #expect(bridge.pusherToMQTTOverflow == .dropOldest)
    }

    @Test func onlyQoS0RulesKeepDropOldest() throws {
        let bridge = try Self.bridge(rules: [Self.mqttRule("a", qos: 0)])
        #expect(bridge.mqttToPusherOverflow == .dropOldest)
        #expect(try Self.bridge(rules: []).mqttToPusherOverflow == .dropOldest)
    }

    @Test("an explicit lossy choice applies to both directions", arguments: [BufferOverflowPolicy.dropOldest, .dropNewest])
    func anExplicitLossyChoiceWins(policy: BufferOverflowPolicy) throws {
        let bridge = try Self.bridge(buffer: "overflow = \"\(policy.rawValue)\"", rules: [Self.mqttRule("a", qos: 2)])
        #expect(bridge.mqttToPusherOverflow == policy)
        #expect(bridge.pusherToMQTTOverflow == policy)
    }

    @Test func explicitBackpressureHoldsMQTTToPusherEvenAtQoS0AndFallsBackForPusherToMQTT() throws {
        let bridge = try Self.bridge(buffer: "overflow = \"backpressure\"", rules: [Self.mqttRule("a", qos: 0)])
        #expect(bridge.mqttToPusherOverflow == .backpressure)
        #expect(bridge.pusherToMQTTOverflow == .dropOldest)
    }

    @Test func aMisspelledPolicyIsRefusedWithTheChoices() {
        #expect(throws: (any Error).self) { try Self.bridge(buffer: "overflow = \"back-pressure\"", rules: []) }
    }
}
