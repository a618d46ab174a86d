import PusherProtocol
import Testing

@testable import PusherLocal

/// Watchlist online/offline events (docs/pusher-protocol.md §1, "User sign-in"), on the pure hub.
struct WatchlistTests {
    let a = ConnectionID(1)
    let b = ConnectionID(2)
    let c = ConnectionID(3)
    let d = ConnectionID(4)

    @Test func theFrameCarriesItsEventsAsAJSONString() {
        #expect(
            watchlistFrame("online", ["u1", "u2"])
                == "{\"event\":\"pusher_internal:watchlist_events\",\"data\":\"{\\\"events\\\":[{\\\"name\\\":\\\"online\\\",\\\"user_ids\\\":[\\\"u1\\\",\\\"u2\\\"]}]}\"}"
        )
    }

    @Test func signinGivesTheWatcherTheWatchedUsersAlreadyOnline() {
        var users = UserHub([a, b, c], watchlistEvents: true)
        _ = users.signin(b, "u2")
        _ = users.signin(c, "u3")
        let actions = users.signin(a, "u1", watchlist: ["u3", "u9", "u2"])
        #expect(framesTo(a, actions).dropFirst().map { $0 } == [watchlistFrame("online", ["u3", "u2"])])
        #expect(framesTo(b, actions).isEmpty)
    }

    @Test func nothingOnlineMeansNoInitialEvent() {
        var users = UserHub([a], watchlistEvents: true)
        #expect(framesTo(a, users.signin(a, "u1", watchlist: ["nobody"])).count == 1)
    }

    @Test func aUserIsOnlineWithItsFirstConnectionAndOfflineAfterItsLast() {
        var users = UserHub([a, b, c], watchlistEvents: true)
        _ = users.signin(a, "watcher", watchlist: ["u2"])
        let first = users.signin(b, "u2")
        #expect(framesTo(a, first) == [watchlistFrame("online", ["u2"])])
        let second = users.signin(c, "u2")
        #expect(framesTo(a, second).isEmpty)
        #expect(framesTo(a, users.hub.disconnected(b)).isEmpty)
        #expect(framesTo(a, users.hub.disconnected(c)) == [watchlistFrame("offline", ["u2"])])
        #expect(users.hub.counters.watchlistEvents == 2)
        #expect(users.hub.onlineUserCount == 1)
    }

    @Test func everyWatchingConnectionHearsIt() {
        var users = UserHub([a, b, c], watchlistEvents: true)
        _ = users.signin(a, "w1", watchlist: ["u"])
        _ = users.signin(b, "w2", watchlist: ["u", "x"])
        let actions = users.signin(c, "u")
        #expect(framesTo(a, actions) == [watchlistFrame("online", ["u"])])
        #expect(framesTo(b, actions) == [watchlistFrame("online", ["u"])])
        #expect(framesTo(c, actions).count == 1)  // its own signin_success only
    }

    @Test func aClosedWatcherHearsNothingMore() {
        var users = UserHub([a, b], watchlistEvents: true)
        _ = users.signin(a, "w", watchlist: ["u"])
        _ = users.hub.disconnected(a)
        let actions = users.signin(b, "u")
        #expect(framesTo(a, actions).isEmpty)
        #expect(users.hub.watchers.isEmpty)
    }

    @Test func aTerminatedUserGoesOfflineWhenItsConnectionsEnd() {
        var users = UserHub([a, b, c], watchlistEvents: true)
        _ = users.signin(a, "w", watchlist: ["u"])
        _ = users.signin(b, "u")
        _ = users.signin(c, "u")
        let closes = users.hub.terminateUserConnections("u")
        #expect(closes.count == 2)
        _ = users.hub.disconnected(b)
        #expect(framesTo(a, users.hub.disconnected(c)) == [watchlistFrame("offline", ["u"])])
    }

    @Test func signingInAgainReplacesTheWatchlist() {
        var users = UserHub([a, b, c], watchlistEvents: true)
        _ = users.signin(a, "w", watchlist: ["u1"])
        _ = users.signin(a, "w", watchlist: ["u2"])
        #expect(framesTo(a, users.signin(b, "u1")).isEmpty)
        #expect(framesTo(a, users.signin(c, "u2")) == [watchlistFrame("online", ["u2"])])
    }

    @Test func over100IDsGet4302AndTheFirst100AreKept() throws {
        var users = UserHub([a, b, c], watchlistEvents: true)
        let ids = (0...100).map { "u\($0)" }
        _ = users.signin(b, "u99")
        _ = users.signin(c, "u100")
        let actions = users.signin(a, "w", watchlist: ids)
        let frames = framesTo(a, actions)
        #expect(frames.count == 3)
        #expect(frames[0].contains("pusher:signin_success"))
        #expect(frames[1].hasPrefix("{\"event\":\"pusher:error\""))
        #expect(frames[1].contains("\"code\":4302"))
        #expect(frames[1].contains("101 user ids"))
        #expect(frames[2] == watchlistFrame("online", ["u99"]))  // u100 is the 101st: not kept
        #expect(users.hub.counters.watchlistsTruncated == 1)
        #expect(users.hub.watchers["u100"] == nil)
        #expect(users.hub.watchers["u0"] == [a])
        #expect(framesTo(a, users.hub.disconnected(c)).isEmpty)
        #expect(framesTo(a, users.hub.disconnected(b)) == [watchlistFrame("offline", ["u99"])])
    }

    @Test func exactly100IDsAreFineAndDuplicatesCountOnce() {
        var users = UserHub([a], watchlistEvents: true)
        let ids = (0..<100).map { "u\($0)" } + ["u0", "u1"]
        let frames = framesTo(a, users.signin(a, "w", watchlist: ids))
        #expect(frames.count == 1)
        #expect(users.hub.counters.watchlistsTruncated == 0)
    }

    @Test func withWatchlistEventsOffNothingIsSent() {
        var users = UserHub([a, b])
        _ = users.signin(a, "w", watchlist: (0...150).map { "u\($0)" })
        let actions = users.signin(b, "u1")
        #expect(framesTo(a, actions).isEmpty)
        #expect(framesTo(a, users.hub.disconnected(b)).isEmpty)
        #expect(users.hub.counters.watchlistsTruncated == 0)
        #expect(users.hub.watchers.isEmpty)
    }
}
