import Foundation
import PusherLocal
import PusherProtocol
import Testing

/// The connections endpoint over HTTP, against a running server (the hub's side is in
/// PusherLocalTests/ConnectionsEndpointTests.swift).
@Suite(.timeLimit(.minutes(1))) struct ConnectionsEndpointServerTests {
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
