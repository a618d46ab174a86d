import Testing

@testable import BridgeCore

@Suite("Small parts")
struct SmallPartsTests {
    @Test func configLocationPrefersFlagThenEnvironmentThenDefault() {
        #expect(ConfigLocation.resolve(explicit: "a.conf", environment: ["PUSHER_MQTT_BRIDGE_CONFIG": "b.conf"]) == "a.conf")
        #expect(ConfigLocation.resolve(explicit: nil, environment: ["PUSHER_MQTT_BRIDGE_CONFIG": "b.conf"]) == "b.conf")
        #expect(
            ConfigLocation.resolve(explicit: nil, environment: ["PUSHER_MQTT_BRIDGE_CONFIG": ""]) == "/etc/pusher-mqtt-bridge/bridges.conf")
        #expect(ConfigLocation.resolve(explicit: nil, environment: [:]) == "/etc/pusher-mqtt-bridge/bridges.conf")
    }

    @Test func deadLetterJSONForAPusherEvent() {
        let letter = DeadLetter(
            rule: "chat", reason: .missingPlaceholderValue("user_id"), source: .pusher(channel: "presence-chat", event: "client-msg"),
            payload: Array("say \"hi\"\n".utf8))
        #expect(
            String(decoding: letter.jsonPayload, as: UTF8.self)
                == #"{"reason":"the message has no value for {user_id}","code":"missing_value","rule":"chat","source":{"pusher_channel":"presence-chat","pusher_event":"client-msg"},"payload":"say \"hi\"\n"}"#
        )
        #expect(JSONText.isValid(letter.jsonPayload))
    }

    @Test(arguments: [
        ([UInt8](), ""), ([0x66], "Zg=="), ([0x66, 0x6F], "Zm8="), ([0x66, 0x6F, 0x6F], "Zm9v"), ([0xFF, 0xFE, 0xFD, 0xFC], "//79/A=="),
    ])
    func base64(_ bytes: [UInt8], _ encoded: String) {
        #expect(Base64.encode(bytes) == encoded)
    }

    @Test func spellingSuggestions() {
        #expect(Spelling.suggestion(for: "jsno", among: ["text", "json"]) == "json")
        #expect(Spelling.suggestion(for: "mqtt-broker", among: ["pusher", "mqtt"]) == "mqtt")
        #expect(Spelling.suggestion(for: "zzz", among: ["pusher", "mqtt"]) == nil)
    }
}
