import Foundation
import PusherProtocol
import TestSupport
import Testing

@testable import PusherLocal

/// `pusher_internal:subscription_count` and `subscription_count` webhooks of the pure hub, and
/// `info=subscription_count` on channel lists (docs/contract.md §6, §7.1).
struct SubscriptionCountTests {
    let t0 = ContinuousClock.now
    let a = ConnectionID(1)
    let b = ConnectionID(2)
    let c = ConnectionID(3)

    func hub(enabled: Bool) -> AppHub {
        var hub = AppHub(app: .demo, activityTimeoutSeconds: 120, subscriptionCountEvents: enabled)
        for id in [a, b, c] { _ = hub.connected(id, socketID: "\(id.rawValue).\(id.rawValue)") }
        return hub
    }

    func join(_ id: ConnectionID, _ channel: String, hub: inout AppHub) -> [HubAction] {
        let socketID = "\(id.rawValue).\(id.rawValue)"
        return hub.received(subscribeFrame(socketID: socketID, channel: channel, userID: "user\(id.rawValue)"), from: id, now: t0)
    }

    func unsubscribe(_ id: ConnectionID, _ channel: String, hub: inout AppHub) -> [HubAction] {
        hub.received("{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"\(channel)\"}}", from: id, now: t0)
    }

    /// The counts in `pusher_internal:subscription_count` frames each connection got.
    func counts(_ actions: [HubAction]) -> [ConnectionID: [Int]] {
        var out: [ConnectionID: [Int]] = [:]
        for action in actions {
            guard case .deliver(let text, let targets) = action, text.contains("pusher_internal:subscription_count") else { continue }
            let outer = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            let inner = (outer?["data"] as? String).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let count = inner?["subscription_count"] as? Int ?? -1
            for target in targets { out[target, default: []].append(count) }
        }
        return out
    }

    func countWebhooks(_ actions: [HubAction]) -> [PusherWebhookEvent] {
        actions.compactMap { if case .webhook(let event) = $0, event.name == "subscription_count" { event } else { nil } }
    }

    @Test func subscribersHearTheCountOnSubscribeUnsubscribeAndDisconnect() {
        var hub = hub(enabled: true)
        let first = join(a, "private-device-1", hub: &hub)
        #expect(counts(first) == [a: [1]])
        let second = join(b, "private-device-1", hub: &hub)
        #expect(counts(second) == [a: [2], b: [2]])
        let third = join(c, "private-device-1", hub: &hub)
        #expect(counts(third) == [a: [3], b: [3], c: [3]])
        // The new subscriber hears subscription_succeeded before the count.
        let toC = third.compactMap { action -> String? in
            switch action {
            case .send(let id, let text) where id == c: text
            case .deliver(let text, let ids) where ids.contains(c): text
            default: nil
            }
        }
        #expect(toC.first?.contains("subscription_succeeded") == true)
        #expect(toC.last?.contains("pusher_internal:subscription_count") == true)

        let left = unsubscribe(b, "private-device-1", hub: &hub)
        #expect(counts(left) == [a: [2], c: [2]])
        let gone = hub.disconnected(c)
        #expect(counts(gone) == [a: [1]])
        #expect(countWebhooks(gone) == [PusherWebhookEvent(name: "subscription_count", channel: "private-device-1", subscriptionCount: 1)])
    }

    @Test func theLastLeaverProducesAZeroCountWebhookBeforeChannelVacated() {
        var hub = hub(enabled: true)
        _ = join(a, "news", hub: &hub)
        let actions = unsubscribe(a, "news", hub: &hub)
        #expect(counts(actions).isEmpty)
        let names = actions.compactMap { if case .webhook(let event) = $0 { event.name } else { nil } }
        #expect(names == ["subscription_count", "channel_vacated"])
        #expect(countWebhooks(actions).first?.subscriptionCount == 0)
    }

    @Test func webhookJSONCarriesTheCount() {
        let event = PusherWebhookEvent(name: "subscription_count", channel: "c", subscriptionCount: 3)
        #expect(event.json == "{\"name\":\"subscription_count\",\"channel\":\"c\",\"subscription_count\":3}")
    }

    @Test func nothingIsAnnouncedWhenSwitchedOff() {
        var hub = hub(enabled: false)
        let actions = join(a, "news", hub: &hub) + join(b, "news", hub: &hub) + unsubscribe(a, "news", hub: &hub)
        #expect(counts(actions).isEmpty)
        #expect(countWebhooks(actions).isEmpty)
    }

    @Test func presenceChannelsAnnounceMembersNotCounts() {
        var hub = hub(enabled: true)
        let actions = join(a, "presence-room", hub: &hub) + join(b, "presence-room", hub: &hub) + hub.disconnected(a)
        #expect(counts(actions).isEmpty)
        #expect(countWebhooks(actions).isEmpty)
    }
}
