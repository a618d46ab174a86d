import TestSupport
import Testing

@testable import PusherChannels

/// The pure state machine keeps the last count per channel, for the current connection only.
struct SubscriptionCountStateTests {
    static func countFrame(_ channel: String, _ data: String) -> PusherFrame {
        PusherFrame(event: "pusher_internal:subscription_count", channel: channel, data: data)
    }

    @Test func theLastCountIsKeptPerChannelAndForgottenWithTheConnection() {
        let clock = ManualClock()
        var machine = makeMachine()
        _ = machine.subscribeRequested("news", now: clock.now)
        _ = machine.subscribeRequested("other", now: clock.now)
        connect(&machine, clock)
        #expect(machine.subscriptionCount(of: "news") == nil)
        let actions = machine.receivedFrame(Self.countFrame("news", #"{"subscription_count":4}"#), now: clock.now)
        #expect(actions == [.deliver(PusherEvent(name: "pusher:subscription_count", channel: "news", data: #"{"subscription_count":4}"#))])
        _ = machine.receivedFrame(Self.countFrame("news", #"{"subscription_count":2}"#), now: clock.now)
        #expect(machine.subscriptionCount(of: "news") == 2)
        #expect(machine.subscriptionCount(of: "other") == nil)
        // Garbled data is still delivered as an event but does not overwrite the count.
        _ = machine.receivedFrame(Self.countFrame("news", "garbled"), now: clock.now)
        #expect(machine.subscriptionCount(of: "news") == 2)
        // A channel we did not ask for changes nothing.
        _ = machine.receivedFrame(Self.countFrame("stranger", #"{"subscription_count":9}"#), now: clock.now)
        #expect(machine.subscriptionCount(of: "stranger") == nil)
        _ = machine.transportClosed(code: 4200, now: clock.now)
        #expect(machine.subscriptionCount(of: "news") == nil)
        _ = machine.unsubscribeRequested("news", now: clock.now)
        #expect(machine.subscriptionCount(of: "news") == nil)
    }
}
