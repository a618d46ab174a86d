import TestSupport
import Testing

@testable import PusherChannels

/// ``ClientEventRateLimiter``: at most `limit` in any sliding window, refusals not counted,
/// reset per connection.
@Suite struct ClientEventRateLimiterTests {
    @Test func admitsTenPerSecondByDefault() {
        var limiter = ClientEventRateLimiter()
        let clock = ManualClock()
        for _ in 0..<10 { #expect(limiter.admit(now: clock.now) == true) }
        #expect(limiter.admit(now: clock.now) == false)
        #expect(limiter.eventsInWindow == 10)
    }

    @Test func theWindowSlides() {
        var limiter = ClientEventRateLimiter(limit: 3, window: .seconds(1))
        var clock = ManualClock()
        for _ in 0..<3 {
            #expect(limiter.admit(now: clock.now) == true)
            clock.advance(.milliseconds(300))
        }
        // t = 900 ms: three in the last second.
        #expect(limiter.admit(now: clock.now) == false)
        // t = 1000 ms: the first (t = 0) has left the window; exactly one second counts as out.
        clock.advance(.milliseconds(100))
        #expect(limiter.admit(now: clock.now) == true)
        #expect(limiter.admit(now: clock.now) == false)
        // t = 1300 ms: the one of t = 300 ms has left.
        clock.advance(.milliseconds(300))
        #expect(limiter.admit(now: clock.now) == true)
    }

    @Test func refusalsDoNotCount() {
        var limiter = ClientEventRateLimiter(limit: 1, window: .seconds(1))
        var clock = ManualClock()
        #expect(limiter.admit(now: clock.now) == true)
        for _ in 0..<5 {
            clock.advance(.milliseconds(100))
            #expect(limiter.admit(now: clock.now) == false)
        }
        // One second after the admitted one, however many were refused since.
        clock.advance(.milliseconds(500))
        #expect(limiter.admit(now: clock.now) == true)
    }

    @Test func aLostConnectionStartsOver() {
        var limiter = ClientEventRateLimiter(limit: 2, window: .seconds(1))
        let clock = ManualClock()
        #expect(limiter.admit(now: clock.now) == true)
        #expect(limiter.admit(now: clock.now) == true)
        limiter.connectionLost()
        #expect(limiter.eventsInWindow == 0)
        #expect(limiter.admit(now: clock.now) == true)
    }
}
