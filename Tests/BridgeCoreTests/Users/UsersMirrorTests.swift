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

    @Test mutating func eventsToTheUserComeFromThePublishedConnectionOnly() {
        let clock = ManualClock()
        #expect(mirror.userEvent(connection: 0, event: "alert", data: "{}") == nil)
        _ = mirror.signedIn(connection: 1, userID: "bridge-factory", watchlist: [], now: clock.now)
        _ = mirror.signedIn(connection: 0, userID: "bridge-factory", watchlist: [], now: clock.now)
        #expect(mirror.userEvent(connection: 1, event: "alert", data: "{}") == nil)
        let publish = mirror.userEvent(connection: 0, event: "alert/x", data: #"{"level":3}"#)
        #expect(publish.map { states([$0]) } == [#"dash/users/bridge-factory/events/alert%2Fx={"level":3} (not retained)"#])
        #expect(publish?.qos == 1 && publish?.rule == "users")
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
