import Logging
import MQTTVocabulary
import Testing

@testable import MosquittoClient

/// `MQTTClientLimits` is what the config loader checks (issue 26, defect 2); here it is held to
/// what the client and libmosquitto itself refuse when a client is made.
@Suite struct ConfigurationLimitsTests {
    private let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// Made, not connected: `nil` when the client takes the configuration, else its refusal.
    private func refusal(_ configuration: MQTTConfiguration) -> MQTTError? {
        do {
            _ = try MQTTClient(configuration: configuration, logger: quiet)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        (Duration.zero, false), (.seconds(3), false), (.milliseconds(4999), false), (.seconds(5), true), (.seconds(65535), true),
        (.milliseconds(65_535_001), false), (.seconds(65536), false),
    ])
    func keepAliveLimits(keepAlive: Duration, accepted: Bool) {
        let error = refusal(MQTTConfiguration(host: "127.0.0.1", clientID: "c", keepAlive: keepAlive))
        #expect((error == nil) == accepted)
        #expect((MQTTClientLimits.keepAliveProblem(keepAlive) == nil) == accepted)
        if let error {
            #expect(error.kind == .invalidConfiguration)
            #expect(error.message == "invalid MQTT configuration: keepalive must be between 5s and 65535s (the MQTT client's limits)")
        }
    }

    /// `mosquitto_validate_utf8` against `MQTTClientLimits.stringProblem`, for every code point of
    /// the Basic Multilingual Plane and both ends of every other plane.
    @Test func theCharacterRuleIsLibmosquittos() {
        var values = Array(UInt32(0)...0xFFFF)
        for plane in UInt32(1)...16 {
            values += (plane << 16)...((plane << 16) + 0xFF)
            values += ((plane << 16) + 0xFF00)...((plane << 16) + 0xFFFF)
        }
        var mismatches: [String] = []
        for value in values {
            guard let scalar = Unicode.Scalar(value) else { continue }  // surrogates: no Swift string holds one
            var text = "a"
            text.unicodeScalars.append(scalar)
            text += "b"
            let ours = MQTTClientLimits.stringProblem(text) == nil
            if ours != MosquittoCode.acceptsCharacters(of: text) { mismatches.append("U+" + String(value, radix: 16, uppercase: true)) }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(20))")
    }

    /// Before `MQTTClientLimits`, a client id with a control character reached `mosquitto_new`,
    /// which failed without saying why; a will topic with one failed in `mosquitto_will_set`.
    @Test func refusedCharactersAreInvalidConfigurationsThatSayWhere() {
        let clientID = refusal(MQTTConfiguration(host: "127.0.0.1", clientID: "a\u{1}b"))
        #expect(clientID?.kind == .invalidConfiguration)
        #expect(
            clientID?.message
                == "invalid MQTT configuration: client_id contains the control character U+0001, which the MQTT client (libmosquitto) refuses"
        )
        let will = refusal(
            MQTTConfiguration(host: "127.0.0.1", clientID: "c", will: MQTTWill(topic: "s/\u{85}", payload: Array("offline".utf8))))
        #expect(will?.kind == .invalidConfiguration)
        #expect(will?.message.contains("will topic contains the control character U+0085") == true)
        let username = refusal(MQTTConfiguration(host: "127.0.0.1", clientID: "c", username: scalars("u", 0xFFFE, "")))
        #expect(username?.message.contains("username contains the noncharacter U+FFFE") == true)
    }

    @Test func stringsUpToTheLengthLimitAreTaken() {
        let longest = String(repeating: "x", count: MQTTClientLimits.maximumStringBytes)
        let will = MQTTWill(topic: longest, payload: [])
        #expect(refusal(MQTTConfiguration(host: "127.0.0.1", clientID: longest, username: longest, will: will)) == nil)
        for configuration in [
            MQTTConfiguration(host: "127.0.0.1", clientID: longest + "x"),
            MQTTConfiguration(host: "127.0.0.1", clientID: "c", username: longest + "x"),
            MQTTConfiguration(host: "127.0.0.1", clientID: "c", will: MQTTWill(topic: longest + "x", payload: [])),
        ] {
            #expect(refusal(configuration)?.message.hasSuffix("is longer than 65535 bytes") == true)
        }
    }
}

/// `prefix`, the scalar `value` and `suffix`: Swift's `\u{…}` does not take noncharacters.
func scalars(_ prefix: String, _ value: UInt32, _ suffix: String) -> String {
    var text = prefix
    text.unicodeScalars.append(Unicode.Scalar(value)!)
    return text + suffix
}
