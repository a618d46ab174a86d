import TestSupport
import Testing

@testable import BridgeCore

/// `drain_rate` (docs/contract.md §8.3): the backlog paced with a manual clock, live messages not,
/// and the config that sets it.
@Suite struct DrainPacerTests {
    @Test func theBacklogLeavesAtTheRate() {
        var clock = ManualClock()
        var pacer = DrainPacer(ratePerSecond: 500, startedAtMillis: 1_000)
        let start = clock.now
        // 10-event batches: each waits for its turn; 1,000 events take 2 s.
        var sent = 0
        while sent < 1_000 {
            let wait = pacer.admit(backlog: 10, now: clock.now)
            clock.advance(wait)
            sent += 10
        }
        // The last batch may start at 990 / 500 s (the first went at once); within rounding.
        let took = clock.now - start
        #expect(took > .seconds(1.98) - .microseconds(1) && took < .seconds(1.98) + .microseconds(1), "\(took)")
        #expect(pacer.paced == 1_000)
    }

    @Test func liveMessagesAreNotHeld() {
        let clock = ManualClock()
        var pacer = DrainPacer(ratePerSecond: 1, startedAtMillis: 1_000)
        #expect(pacer.isBacklog(receivedAtMillis: 999))
        #expect(!pacer.isBacklog(receivedAtMillis: 1_000))
        _ = pacer.admit(backlog: 5, now: clock.now)
        // A batch with no backlog in it goes now, however far behind the backlog's schedule is.
        #expect(pacer.admit(backlog: 0, now: clock.now) == .zero)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .seconds(5))
    }

    @Test func noCreditAfterAQuietSpell() {
        var clock = ManualClock()
        var pacer = DrainPacer(ratePerSecond: 10, startedAtMillis: 1_000)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .zero)
        clock.advance(.seconds(60))
        // A minute of silence is no licence for 600 at once.
        #expect(pacer.admit(backlog: 1, now: clock.now) == .zero)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .milliseconds(100))
        #expect(pacer.admit(backlog: 1, now: clock.now) == .milliseconds(200))
    }

    @Test func aSenderThatFellBehindBrieflyCatchesUp() {
        var clock = ManualClock()
        var pacer = DrainPacer(ratePerSecond: 10, startedAtMillis: 1_000)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .zero)
        // The sender came back 500 ms late (a slow request): the five it owes go at once, then the
        // schedule goes on where it was.
        clock.advance(.milliseconds(600))
        for _ in 0..<5 { #expect(pacer.admit(backlog: 1, now: clock.now) == .zero) }
        #expect(pacer.admit(backlog: 1, now: clock.now) == .zero)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .milliseconds(100))
    }

    @Test func aResumeMakesWhatCameBeforeItBacklogAndStartsAfresh() {
        let clock = ManualClock()
        var pacer = DrainPacer(ratePerSecond: 2, startedAtMillis: 1_000)
        _ = pacer.admit(backlog: 10, now: clock.now)
        pacer.resumed(atMillis: 5_000)
        #expect(pacer.isBacklog(receivedAtMillis: 4_999))
        #expect(pacer.admit(backlog: 1, now: clock.now) == .zero)
        #expect(pacer.admit(backlog: 1, now: clock.now) == .milliseconds(500))
        // An earlier resume never moves the boundary back.
        pacer.resumed(atMillis: 2_000)
        #expect(pacer.isBacklog(receivedAtMillis: 4_999))
    }

    @Test func theConfigKeys() throws {
        let bridge = try Fixture.parse(Fixture.config(pusher: "drain_rate = \"500/s\"", mqtt: "drain_rate = \"6000/min\"")).bridges[0]
        #expect(bridge.pusher.drainRate == 500)
        #expect(bridge.mqtt.drainRate == 100)
        let plain = try Fixture.parse(Fixture.config()).bridges[0]
        #expect(plain.pusher.drainRate == nil && plain.mqtt.drainRate == nil)
        let check = CheckReport.render(try Fixture.parse(Fixture.config(pusher: "drain_rate = \"0.5/s\"")), file: "bridges.conf")
        #expect(check.contains("backlog drained at most 0.5/s"))
    }

    /// Fixture.config puts the `pusher` text on line 11.
    @Test(arguments: [
        ("drain_rate = \"500\"", "expected a rate such as \"500/s\" or \"6000/min\", found \"500\""),
        ("drain_rate = \"500/h\"", "expected a rate such as \"500/s\" or \"6000/min\", found \"500/h\""),
        ("drain_rate = \"-5/s\"", "expected a rate such as \"500/s\" or \"6000/min\", found \"-5/s\""),
        ("drain_rate = \"0/s\"", "must be more than 0 (leave it out for no pacing)"),
        ("drain_rate = \"2000000/s\"", "is over 1000000/s; leave it out for no pacing"),
        ("drain_rate = \"nan/s\"", "expected a rate such as \"500/s\" or \"6000/min\", found \"nan/s\""),
        ("drain_rate = 500", "expected a string, found an integer"),
    ])
    func badRatesAreReportedAtTheirLine(_ line: String, _ message: String) {
        #expect(
            Fixture.errors(Fixture.config(pusher: line)) == ["/etc/bridges.conf:11: error: bridge.factory.pusher.drain_rate: \(message)"])
    }

    @Test func aChangeOfThePusherDrainRateRestartsTheBridge() throws {
        let old = try Fixture.parse(Fixture.config())
        let new = try Fixture.parse(Fixture.config(pusher: "drain_rate = \"100/s\""))
        #expect(ReloadPlan(old: old, new: new).restarted.map(\.name) == ["factory"])
    }
}
