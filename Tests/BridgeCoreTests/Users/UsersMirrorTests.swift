import BridgeVocabulary
import TestSupport
import Testing

@testable import BridgeCore

/// ``UsersMirror`` with a manual clock: retained online state from watchlist events, events to
/// the bridge's user, and what happens when the connection whose view is published goes.
@Suite struct UsersMirrorTests {
    var mirror = UsersMirror(settings: UsersSettings(topic: "dash/users"))

    func states(_ publishes: [MQTTPublish]) -> [String] {
        publishes.map { "\($0.topic)=\(String(decoding: $0.payload, as: UTF8.self))\($0.retain ? "" : " (not retained)")" }
    }

    @Test mutating func onlineAtOnceOfflineOnlyAfterTheSettleTime() {
        var clock = ManualClock()
        #expect(mirror.signedIn(connection: 0, userID: "bridge", watchlist: ["d1", "d2", "d3"], now: clock.now).isEmpty)
        #expect(mirror.nextDeadline == clock.now + UsersMirror.settleTime)
        // The sign-in's first event: who is online now.
        #expect(
            states(mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d2"], now: clock.now)) == ["dash/users/d2/online=true"])
        clock.advance(UsersMirror.settleTime - .milliseconds(1))
        #expect(mirror.tick(now: clock.now).isEmpty)
        clock.advance(.milliseconds(1))
        #expect(states(mirror.tick(now: clock.now)) == ["dash/users/d1/online=false", "dash/users/d3/online=false"])
        #expect(mirror.nextDeadline == nil)
        #expect(mirror.online == ["d2"])
        // Later changes go out at once, each once.
        #expect(
            states(mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1"], now: clock.now)) == ["dash/users/d1/online=true"])
        #expect(mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1"], now: clock.now).isEmpty)
        #expect(
            states(mirror.watchlistChanged(connection: 0, online: false, userIDs: ["d2"], now: clock.now)) == ["dash/users/d2/online=false"]
        )
    }

    @Test mutating func anOfflineEventBeforeTheSettleTimeGoesOutAtOnce() {
        let clock = ManualClock()
        _ = mirror.signedIn(connection: 0, userID: "bridge", watchlist: ["d1"], now: clock.now)
        _ = mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1"], now: clock.now)
        #expect(
            states(mirror.watchlistChanged(connection: 0, online: false, userIDs: ["d1"], now: clock.now)) == ["dash/users/d1/online=false"]
        )
    }

    @Test mutating func aReconnectKeepsWhatIsTrueAndCorrectsWhatChanged() {
        var clock = ManualClock()
        _ = mirror.signedIn(connection: 0, userID: "bridge", watchlist: ["d1", "d2"], now: clock.now)
        _ = mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1", "d2"], now: clock.now)
        #expect(mirror.signedOut(connection: 0, now: clock.now).isEmpty)  // nobody to ask: left as it was
        clock.advance(.seconds(30))
        _ = mirror.signedIn(connection: 0, userID: "bridge", watchlist: ["d1", "d2"], now: clock.now)
        // d1 is still online: nothing to publish; d2 went offline while we were away.
        #expect(mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1"], now: clock.now).isEmpty)
        clock.advance(UsersMirror.settleTime)
        #expect(states(mirror.tick(now: clock.now)) == ["dash/users/d2/online=false"])
    }

    @Test mutating func theNextConnectionsViewTakesOverWithOnlyTheDifferences() {
        var clock = ManualClock()
        _ = mirror.signedIn(connection: 0, userID: "bridge", watchlist: ["d1", "d2"], now: clock.now)
        _ = mirror.signedIn(connection: 1, userID: "bridge", watchlist: ["d1", "d2"], now: clock.now)
        _ = mirror.watchlistChanged(connection: 0, online: true, userIDs: ["d1"], now: clock.now)
        _ = mirror.watchlistChanged(connection: 1, online: true, userIDs: ["d1"], now: clock.now)
        clock.advance(UsersMirror.settleTime)
        #expect(states(mirror.tick(now: clock.now)) == ["dash/users/d2/online=false"])
        // Connection 1 hears d2 come online; connection 0 drops before it does.
        #expect(mirror.watchlistChanged(connection: 1, online: true, userIDs: ["d2"], now: clock.now).isEmpty)
        #expect(mirror.primary == 0)
        #expect(states(mirror.signedOut(connection: 0, now: clock.now)) == ["dash/users/d2/online=true"])
        #expect(mirror.primary == 1)
    }

    @Test func eventsToTheUserAreMergedAcrossConnections() {
        var clock = ManualClock()
        var mirror = UsersMirror(settings: UsersSettings(topic: "dash/users"), connections: 2)
        for connection in [0, 1] {
            _ = mirror.signedIn(connection: connection, userID: "bridge-factory", watchlist: [], now: clock.now)
            mirror.userChannelLive(connection: connection, now: clock.now)
        }
        // The first copy goes out, from whichever connection; the other's copy is a duplicate.
        let publish = mirror.userEvent(connection: 1, event: "alert/x", data: #"{"level":3}"#, now: clock.now)
        #expect(publish.map { states([$0]) } == [#"dash/users/bridge-factory/events/alert%2Fx={"level":3} (not retained)"#])
        #expect(publish?.qos == 1 && publish?.rule == "users")
        #expect(mirror.userEvent(connection: 0, event: "alert/x", data: #"{"level":3}"#, now: clock.now) == nil)
        // The same event sent twice by the app goes out twice.
        clock.advance(.milliseconds(10))
        #expect(mirror.userEvent(connection: 0, event: "alert/x", data: #"{"level":3}"#, now: clock.now) != nil)
        #expect(mirror.userEvent(connection: 1, event: "alert/x", data: #"{"level":3}"#, now: clock.now) == nil)
    }

    /// What the e2e test found with a single taking connection: an event only the other connection
    /// got while the first was closing, or while it signed in again, was lost.
    @Test func noEventIsLostWhileOneConnectionClosesOrRejoins() {
        var clock = ManualClock()
        var mirror = UsersMirror(settings: UsersSettings(topic: "dash/users"), connections: 2)
        for connection in [0, 1] {
            _ = mirror.signedIn(connection: connection, userID: "u", watchlist: [], now: clock.now)
            mirror.userChannelLive(connection: connection, now: clock.now)
        }
        // Connection 0 is closing: event 1 reaches only connection 1.
        #expect(mirror.userEvent(connection: 1, event: "tick", data: "1", now: clock.now) != nil)
        _ = mirror.signedOut(connection: 0, now: clock.now)
        clock.advance(.milliseconds(100))
        #expect(mirror.userEvent(connection: 1, event: "tick", data: "2", now: clock.now) != nil)
        // Connection 0 signs in again, and its channel takes effect after event 3.
        _ = mirror.signedIn(connection: 0, userID: "u", watchlist: [], now: clock.now)
        #expect(mirror.userEvent(connection: 1, event: "tick", data: "3", now: clock.now) != nil)
        mirror.userChannelLive(connection: 0, now: clock.now)
        // Both deliver event 4: once.
        #expect(mirror.userEvent(connection: 0, event: "tick", data: "4", now: clock.now) != nil)
        #expect(mirror.userEvent(connection: 1, event: "tick", data: "4", now: clock.now) == nil)
    }

    @Test mutating func withOneConnectionEveryEventGoesOut() {
        let clock = ManualClock()
        _ = mirror.signedIn(connection: 0, userID: "u", watchlist: [], now: clock.now)
        mirror.userChannelLive(connection: 0, now: clock.now)
        #expect(mirror.userEvent(connection: 0, event: "tick", data: "1", now: clock.now) != nil)
        #expect(mirror.userEvent(connection: 0, event: "tick", data: "1", now: clock.now) != nil)
    }

    @Test mutating func idsAreEscapedAsTopicLevels() {
        var clock = ManualClock()
        _ = mirror.signedIn(connection: 0, userID: "b", watchlist: [], now: clock.now)
        clock.advance(UsersMirror.settleTime)
        // The watchlist of an endpoint's user_data may name ids the config never saw.
        #expect(
            states(mirror.watchlistChanged(connection: 0, online: true, userIDs: ["a+b"], now: clock.now)) == [
                "dash/users/a%2Bb/online=true"
            ])
    }
}
