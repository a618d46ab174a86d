import Foundation
import PusherLocal
import PusherProtocol
import TestSupport
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

    @Test("disconnect?socket_id= closes that one connection with the code; an unknown socket id is 404, a bad code 400")
    func disconnectOneBySocketID() async throws {
        try await withServer(testConfiguration()) { running async throws in
            @Sendable func disconnect(_ query: String, app: String = "1") async throws -> (status: Int, body: String) {
                try await rawRequest(running, method: "POST", target: "/pusher-local/apps/\(app)/disconnect?\(query)")
            }
            try await withSocket(running.webSocketURL()) { a async throws in
                try await withSocket(running.webSocketURL()) { b async throws in
                    let idA = try await establish(a)
                    let idB = try await establish(b)
                    try await subscribe(b, socketID: idB, channel: "news")
                    let unknown = try await disconnect("socket_id=1.2&code=4200")
                    #expect(unknown.status == 404)
                    #expect(unknown.body.contains("1.2"))
                    #expect(try await disconnect("socket_id=\(idA)&code=99").status == 400)
                    // The socket id of the other app's namespace is not found in this one.
                    #expect(try await disconnect("socket_id=\(idA)", app: "2").status == 404)

                    let reply = try await disconnect("socket_id=\(idA)&code=4200")
                    #expect(reply.status == 200)
                    #expect(reply.body == "{\"closed\":1}")
                    #expect(try await a.closeCode() == 4200)
                    // The server forgets it once its socket is closed; the other stays open and subscribed.
                    try await waitUntil("only b is listed", timeout: .seconds(5)) { running.connections().map(\.socketID) == [idB] }
                    try running.publish(PublishRequest(name: "e", data: "still", channels: ["news"]))
                    #expect(try await b.nextEvent().dataString == "still")
                    // Closed once: the same socket id is unknown now.
                    #expect(try await disconnect("socket_id=\(idA)").status == 404)
                    // The library call does the same.
                    #expect(running.disconnect(socketID: idB, code: 4100))
                    #expect(try await b.closeCode() == 4100)
                    #expect(!running.disconnect(socketID: idB, code: 4100))
                }
            }
        }
    }
}
