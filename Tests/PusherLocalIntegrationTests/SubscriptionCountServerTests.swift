import Foundation
import PusherLocal
import PusherProtocol
import Testing

/// `info=subscription_count` on channel lists, against a running server (the hub's side is in
/// PusherLocalTests/SubscriptionCountTests.swift).
@Suite(.timeLimit(.minutes(1))) struct SubscriptionCountServerTests {
    @Test func channelListsAnswerSubscriptionCountAndUserCount() async throws {
        var configuration = testConfiguration()
        configuration.subscriptionCountEvents = true
        try await withServer(configuration) { running in
            try await withSocket(running.webSocketURL()) { one in
                try await withSocket(running.webSocketURL()) { two in
                    let id1 = try await establish(one)
                    let id2 = try await establish(two)
                    try await subscribe(one, socketID: id1, channel: "private-device-0001")
                    try await subscribe(two, socketID: id2, channel: "private-device-0001")
                    try await subscribe(two, socketID: id2, channel: "private-device-0002")
                    try await subscribe(two, socketID: id2, channel: "private-other")
                    try await subscribe(one, socketID: id1, channel: "presence-room-1", userID: "ann")
                    let list = try await apiRequest(
                        running, method: "GET", path: "/apps/1/channels",
                        params: [("filter_by_prefix", "private-device-"), ("info", "subscription_count")])
                    #expect(list.status == 200)
                    #expect(
                        list.body
                            == #"{"channels":{"private-device-0001":{"subscription_count":2},"#
                            + #""private-device-0002":{"subscription_count":1}}}"#
                    )
                    let presence = try await apiRequest(
                        running, method: "GET", path: "/apps/1/channels",
                        params: [("filter_by_prefix", "presence-room-"), ("info", "user_count,subscription_count")])
                    #expect(presence.body == "{\"channels\":{\"presence-room-1\":{\"user_count\":1,\"subscription_count\":1}}}")
                    let refused = try await apiRequest(
                        running, method: "GET", path: "/apps/1/channels",
                        params: [("filter_by_prefix", "private-"), ("info", "user_count")])
                    #expect(refused.status == 400)
                }
            }
        }
    }
}
