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
}
