import Testing

@testable import BridgeCore

/// The state directory's record of when each channel was last held (docs/pusher-merge.md, "Gap
/// records"): rendered and parsed back; damaged lines skipped and counted.
@Suite struct LastHeldRecordTests {
    static func at(_ millis: Int64) -> UTCTimestamp { UTCTimestamp(millisecondsSince1970: millis) }

    @Test func whatIsRenderedParsesBackTheSame() {
        // Expected: channels in name order, one a line, after the comment; parsed back equal.
        let times = ["device-7": Self.at(1_790_000_012_345), "a;b=c@d,e.f": Self.at(1_790_000_000_001)]
        let text = LastHeldRecord.render(times)
        #expect(text.split(separator: "\n").dropFirst() == ["1790000000001 a;b=c@d,e.f", "1790000012345 device-7"])
        let parsed = LastHeldRecord.parse(text)
        #expect(parsed.times == times && parsed.badLines == 0)
        #expect(LastHeldRecord.parse(LastHeldRecord.render([:])) == ([:], 0))
    }

    @Test(arguments: [
        "1790000000000",  // no channel
        "1790000000000 ",  // empty channel
        "soon device-7",  // not a number
        "99 device-7",  // before 2000
        "1790000000000 bad channel",  // a space in the name
        "1790000000000 dévice",  // not a channel name
        "-1790000000000 device-7",
        "17900000000000000000000 device-7",  // past Int64
    ])
    func aDamagedLineIsSkippedAndCounted(_ line: String) {
        // Expected: the good line survives, the damaged one is counted, nothing else.
        let parsed = LastHeldRecord.parse("# comment\n1790000000000 ok\n\(line)\n")
        #expect(parsed.times == ["ok": Self.at(1_790_000_000_000)])
        #expect(parsed.badLines == 1)
    }

    @Test func aChannelListedTwiceKeepsTheLaterTime() {
        let parsed = LastHeldRecord.parse("1790000000500 c\n1790000000100 c\n")
        #expect(parsed.times == ["c": Self.at(1_790_000_000_500)])
    }
}
