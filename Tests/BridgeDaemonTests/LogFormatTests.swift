import Logging
import Testing

@testable import BridgeDaemon

@Suite struct LogFormatTests {
    @Test func textLinesCarrySortedMetadata() {
        let line = LineLogHandler.render(
            format: .text, timestamp: "T", level: .info, label: "bridge", message: "connected",
            metadata: ["side": "pusher", "bridge": "factory"]
        )
        #expect(line == "T info bridge: connected [bridge=factory side=pusher]\n")
    }

    @Test func jsonLinesAreEscaped() {
        let line = LineLogHandler.render(
            format: .json, timestamp: "T", level: .warning, label: "b", message: "say \"hi\"\n\u{1}",
            metadata: ["mqtt.topic": "a/b"]
        )
        #expect(line == #"{"ts":"T","level":"warning","label":"b","msg":"say \"hi\"\n\u0001","mqtt.topic":"a/b"}"# + "\n")
    }

    @Test func timestampsAreRFC3339WithMilliseconds() {
        let stamp = LineLogHandler.timestamp()
        #expect(stamp.count == 24)
        #expect(stamp.hasSuffix("Z"))
        #expect(Array(stamp)[10] == "T" && Array(stamp)[19] == ".")
    }
}
