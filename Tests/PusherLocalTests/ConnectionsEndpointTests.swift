import Foundation
import PusherProtocol
import Testing

@testable import PusherLocal

/// The connections endpoint (`GET /pusher-local/apps/ID/connections`): which channels each open
/// connection holds, from the server's own records (the cluster tests prove with it that every
/// channel is held by exactly one bridge instance).
struct ConnectionsEndpointTests {
    let t0 = ContinuousClock.now

    @Test("the hub lists every open connection with its sorted channels, presence user and address")
    func hubRecords() {
        var hub = AppHub(app: .demo, activityTimeoutSeconds: 120)
        let a = ConnectionID(1)
        let b = ConnectionID(2)
        _ = hub.connected(b, socketID: "2.2", remote: "127.0.0.1:40002")
        _ = hub.connected(a, socketID: "1.1")
        #expect(
            hub.connectionRecords == [
                ConnectionRecord(socketID: "1.1", channels: []), ConnectionRecord(socketID: "2.2", channels: [], remote: "127.0.0.1:40002"),
            ])

        for channel in ["zeta", "alpha"] {
            _ = hub.received("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"\(channel)\"}}", from: b, now: t0)
        }
        let data = "{\"user_id\":\"ann\",\"user_info\":{}}"
        let auth = PusherAuth.channelAuth(
            key: "app-key", secret: "app-secret", socketID: "1.1", channel: "presence-room", channelData: data)
        let frame =
            "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"presence-room\",\"auth\":\(jsonQuoted(auth)),\"channel_data\":\(jsonQuoted(data))}}"
        _ = hub.received(frame, from: a, now: t0)
        // A refused subscription is not a held channel.
        _ = hub.received("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"private-x\",\"auth\":\"app-key:bad\"}}", from: a, now: t0)
        #expect(
            hub.connectionRecords == [
                ConnectionRecord(socketID: "1.1", channels: ["presence-room"], userID: "ann"),
                ConnectionRecord(socketID: "2.2", channels: ["alpha", "zeta"], remote: "127.0.0.1:40002"),
            ])

        _ = hub.received("{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":\"zeta\"}}", from: b, now: t0)
        _ = hub.disconnected(a)
        #expect(hub.connectionRecords == [ConnectionRecord(socketID: "2.2", channels: ["alpha"], remote: "127.0.0.1:40002")])
    }

    @Test("records as JSON: optional fields only when known, names escaped")
    func recordJSON() {
        #expect(ConnectionRecord.json([]) == "[]")
        let records = [
            ConnectionRecord(socketID: "1.2", channels: []),
            ConnectionRecord(socketID: "3.4", channels: ["a", "q\"uote"], userID: "u", remote: "[::1]:5"),
        ]
        #expect(
            ConnectionRecord.json(records)
                == "[{\"socket_id\":\"1.2\",\"channels\":[]},{\"socket_id\":\"3.4\",\"channels\":[\"a\",\"q\\\"uote\"],\"user_id\":\"u\",\"remote\":\"[::1]:5\"}]"
        )
    }

    @Test("a peer address is ip:port, IPv6 in brackets")
    func hostAndPort() throws {
        #expect(PusherLocalServer.hostAndPort(try .init(ipAddress: "127.0.0.1", port: 4000)) == "127.0.0.1:4000")
        #expect(PusherLocalServer.hostAndPort(try .init(ipAddress: "::1", port: 80)) == "[::1]:80")
    }

    @Test("over HTTP: two real clients, their channels and addresses; unknown app 404, wrong method 404")
    func endpointOverHTTP() async throws {
        try await withServer(testConfiguration()) { running async throws in
            #expect(try await rawRequest(running, method: "GET", target: "/pusher-local/apps/1/connections").body == "[]")
            try await withSocket(running.webSocketURL()) { a async throws in
                try await withSocket(running.webSocketURL()) { b async throws in
                    let idA = try await establish(a)
                    let idB = try await establish(b)
                    try await subscribe(a, socketID: idA, channel: "news")
                    try await subscribe(a, socketID: idA, channel: "presence-team", userID: "ann")
                    try await subscribe(b, socketID: idB, channel: "news")
                    let reply = try await rawRequest(running, method: "GET", target: "/pusher-local/apps/1/connections")
                    #expect(reply.status == 200)
                    let list = try #require(try JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [[String: Any]])
                    let byID = Dictionary(uniqueKeysWithValues: list.compactMap { r in (r["socket_id"] as? String).map { ($0, r) } })
                    #expect(byID[idA]?["channels"] as? [String] == ["news", "presence-team"])
                    #expect(byID[idA]?["user_id"] as? String == "ann")
                    #expect(byID[idB]?["channels"] as? [String] == ["news"])
                    #expect(byID[idB]?["user_id"] == nil)
                    for record in list {
                        let remote = try #require(record["remote"] as? String)
                        #expect(remote.hasPrefix("127.0.0.1:"))
                        #expect(Int(remote.dropFirst("127.0.0.1:".count)).map { $0 > 0 } == true)
                    }
                    #expect(running.connections().map(\.socketID).sorted() == [idA, idB].sorted())
                    // The second app has its own (empty) list.
                    #expect(try await rawRequest(running, method: "GET", target: "/pusher-local/apps/2/connections").body == "[]")
                }
            }
            #expect(try await rawRequest(running, method: "GET", target: "/pusher-local/apps/9/connections").status == 404)
            #expect(try await rawRequest(running, method: "POST", target: "/pusher-local/apps/1/connections").status == 404)
        }
    }
}
