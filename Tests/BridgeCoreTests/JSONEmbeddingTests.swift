import Testing

@testable import BridgeCore

/// The bridge's validator decides whether a payload is embedded as JSON or as a string: what the
/// shared tokenizer refuses must arrive as a string, byte for byte.
@Suite struct JSONEmbeddingTests {
    @Test(arguments: [
        (#"{"a":{]}"#, false), ("[1,]", false), ("02", false), ("nul", false), ("{\"a\":1}", true), (" [true] ", true),
    ])
    func payloadsAreEmbeddedOnlyWhenTheyAreJSON(_ payload: String, _ embedded: Bool) {
        let envelope = RuleTable.mqttEnvelope(topic: "t", payload: payload, qos: 0, retain: false, receivedAt: Fixture.time)
        let expected = embedded ? payload : JSONText.quoted(payload)
        #expect(envelope.contains(#","payload":"# + expected + #","qos""#))
        #expect(JSONText.isValid(envelope))
    }

    @Test func aPayloadAtTheNestingLimitStaysJSONButItsEnvelopeIsOneLevelDeeper() {
        let payload = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(JSONText.isValid(payload))
        let envelope = RuleTable.mqttEnvelope(topic: "t", payload: payload, qos: 0, retain: false, receivedAt: Fixture.time)
        #expect(envelope.contains(payload))
        #expect(!JSONText.isValid(envelope))
    }
}
