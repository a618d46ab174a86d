import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// Signing in as a user, driven through the whole machine with a manual clock
/// (docs/pusher-protocol.md §1 "User sign-in").
@Suite struct UserSessionTests {
    let userData = #"{"id":"u1","user_info":{"name":"Ann"},"watchlist":["d1","d2"]}"#

    var auth: PusherUserAuth {
        PusherUserAuth(auth: "key:" + String(repeating: "a", count: 64), userData: userData)
    }

    func frames(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .send(let text) = $0 { text } else { nil } }
    }

    func updates(_ actions: [Action]) -> [PusherUserUpdate] {
        actions.compactMap { if case .user(let update) = $0 { update } else { nil } }
    }

    func signedIn(_ machine: inout Machine, _ clock: ManualClock, socketID: String = "1.1") -> [Action] {
        #expect(machine.userAuthenticationSucceeded(socketID: socketID, auth: auth, now: clock.now).count == 1)
        return machine.receivedFrame(
            PusherFrame(event: "pusher:signin_success", data: #"{"user_data":"# + JSONString.quoted(userData) + "}"), now: clock.now)
    }

    @Test func signInBeforeConnectingWaitsForTheConnection() throws {
        let clock = ManualClock()
        var machine = makeMachine()
        #expect(machine.signInRequested(now: clock.now) == [])
        let actions = connect(&machine, clock, socketID: "1.1")
        #expect(actions.contains(.authenticateUser(socketID: "1.1")))
        let sent = frames(machine.userAuthenticationSucceeded(socketID: "1.1", auth: auth, now: clock.now))
        #expect(sent.count == 1)
        let frame = try PusherFrame.parse(sent[0])
        #expect(frame.event == "pusher:signin")
        let data = try #require(try? JSONScanner.object(frame.data ?? ""))
        #expect(data["user_data"] == .string(userData))
        #expect(data["auth"] == .string(auth.auth))
    }

    @Test func successReportsTheUserAndSubscribesToItsChannel() throws {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        #expect(machine.signInRequested(now: clock.now) == [.authenticateUser(socketID: "1.1")])
        let actions = signedIn(&machine, clock)
        let user = try #require(machine.signedInUser)
        #expect(user.id == "u1")
        #expect(user.watchlist == ["d1", "d2"])
        #expect(user.userInfo == #"{"name":"Ann"}"#)
        #expect(updates(actions) == [.signedIn(user)])
        let subscribe = try PusherFrame.parse(try #require(frames(actions).first))
        #expect(subscribe.event == "pusher:subscribe")
        #expect(subscribe.data?.contains(##""channel":"#server-to-user-u1""##) == true)
        let succeeded = machine.receivedFrame(
            PusherFrame(event: "pusher_internal:subscription_succeeded", channel: "#server-to-user-u1", data: "{}"), now: clock.now)
        #expect(succeeded == [.subscriptionSucceeded(channel: "#server-to-user-u1")])
    }

    @Test func eventsToTheUserAreUserUpdatesNotChannelEvents() {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        _ = signedIn(&machine, clock)
        let actions = machine.receivedFrame(
            PusherFrame(event: "alert", channel: "#server-to-user-u1", data: #"{"level":3}"#), now: clock.now)
        #expect(actions == [.user(.event(PusherEvent(name: "alert", channel: "#server-to-user-u1", data: #"{"level":3}"#)))])
        let internalEvent = machine.receivedFrame(
            PusherFrame(event: "pusher_internal:member_added", channel: "#server-to-user-u1", data: "{}"), now: clock.now)
        #expect(updates(internalEvent).isEmpty)
        // Another user's channel is not ours.
        let other = machine.receivedFrame(PusherFrame(event: "alert", channel: "#server-to-user-u2", data: "{}"), now: clock.now)
        #expect(updates(other).isEmpty)
    }

    @Test func everyReconnectSignsInAgain() {
        var clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        _ = signedIn(&machine, clock)
        let closed = machine.transportClosed(code: 4200, now: clock.now)
        #expect(machine.signedInUser == nil)
        reconnectsWithinSpread(&machine, &clock, after: closed)
        let again = machine.receivedFrame(established("2.2"), now: clock.now)
        #expect(again.contains(.authenticateUser(socketID: "2.2")))
        // A late auth for the old socket is dropped.
        #expect(machine.userAuthenticationSucceeded(socketID: "1.1", auth: auth, now: clock.now) == [])
        #expect(updates(signedIn(&machine, clock, socketID: "2.2")).count == 1)
        #expect(machine.signedInUser?.id == "u1")
    }

    @Test func anAuthenticatorFailureIsReportedAndRetriedOnTheNextConnection() {
        var clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        let failed = updates(machine.userAuthenticationFailed(socketID: "1.1", message: "HTTP 403", now: clock.now))
        #expect(failed.count == 1)
        if case .signInFailed(let error)? = failed.first {
            #expect(error.isSignInFailure)
            #expect(error.message.contains("HTTP 403"))
        } else {
            Issue.record("expected signInFailed, got \(failed)")
        }
        // Asking again on the same connection tries again.
        #expect(machine.signInRequested(now: clock.now) == [.authenticateUser(socketID: "1.1")])
        _ = machine.userAuthenticationFailed(socketID: "1.1", message: "HTTP 403", now: clock.now)
        let closed = machine.transportClosed(code: 4200, now: clock.now)
        reconnectsWithinSpread(&machine, &clock, after: closed)
        #expect(machine.receivedFrame(established("2.2"), now: clock.now).contains(.authenticateUser(socketID: "2.2")))
    }

    @Test func aServerRefusalIsASignInFailureNotASubscriptionFailure() {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        _ = machine.userAuthenticationSucceeded(socketID: "1.1", auth: auth, now: clock.now)
        let refused = machine.receivedFrame(
            PusherFrame(event: "pusher:error", data: #"{"message":"Invalid signature for pusher:signin","code":null}"#), now: clock.now)
        guard case .signInFailed(let error)? = updates(refused).first else {
            Issue.record("expected signInFailed, got \(refused)")
            return
        }
        #expect(error.message.contains("Invalid signature"))
        #expect(machine.signedInUser == nil)
        // A success that arrives after the refusal is not trusted.
        let late = machine.receivedFrame(
            PusherFrame(event: "pusher:signin_success", data: #"{"user_data":"# + JSONString.quoted(userData) + "}"), now: clock.now)
        #expect(late == [.ignoredFrame(event: "pusher:signin_success", reason: "no sign-in in flight")])
    }

    @Test(arguments: [
        ("not json", #"{"user_data":"{oops"}"#),
        ("no user_data", #"{"user":"x"}"#),
        ("no id", #"{"user_data":"{\"name\":\"x\"}"}"#),
        ("numeric id", #"{"user_data":"{\"id\":12}"}"#),
        ("bad id", #"{"user_data":"{\"id\":\"a b\"}"}"#),
        ("watchlist not an array", #"{"user_data":"{\"id\":\"u1\",\"watchlist\":\"d1\"}"}"#),
    ])
    func aMalformedSuccessIsAFailure(_ label: String, _ data: String) {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        _ = machine.userAuthenticationSucceeded(socketID: "1.1", auth: auth, now: clock.now)
        let actions = machine.receivedFrame(PusherFrame(event: "pusher:signin_success", data: data), now: clock.now)
        guard case .signInFailed(let error)? = updates(actions).first else {
            Issue.record("\(label): expected signInFailed, got \(actions)")
            return
        }
        #expect(error.isSignInFailure, "\(label)")
        #expect(machine.signedInUser == nil, "\(label)")
    }

    @Test(arguments: [
        #"{"name":"x"}"#,
        "not json",
        #"{"id":"u1","user_info":""# + String(repeating: "x", count: 10 * 1024) + #""}"#,
    ])
    func anAuthenticatorsUnusableUserDataIsNotSent(_ userData: String) {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        let actions = machine.userAuthenticationSucceeded(
            socketID: "1.1", auth: PusherUserAuth(auth: "k:s", userData: userData), now: clock.now)
        #expect(frames(actions).isEmpty)
        guard case .signInFailed(let error)? = updates(actions).first else {
            Issue.record("expected signInFailed, got \(actions)")
            return
        }
        #expect(error.isSignInFailure)
    }

    @Test func watchlistEventsBecomeTypedUpdates() {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        let before = machine.receivedFrame(
            PusherFrame(event: "pusher_internal:watchlist_events", data: #"{"events":[{"name":"online","user_ids":["d1"]}]}"#),
            now: clock.now)
        #expect(before == [.ignoredFrame(event: "pusher_internal:watchlist_events", reason: "not signed in")])
        _ = machine.signInRequested(now: clock.now)
        _ = signedIn(&machine, clock)
        let data =
            #"{"events":[{"name":"online","user_ids":["d1","d2"]},{"name":"offline","user_ids":["d3"]},{"name":"away","user_ids":["x"]}]}"#
        let actions = machine.receivedFrame(PusherFrame(event: "pusher_internal:watchlist_events", data: data), now: clock.now)
        #expect(
            updates(actions) == [
                .watchlist(PusherWatchlistEvent(kind: .online, userIDs: ["d1", "d2"])),
                .watchlist(PusherWatchlistEvent(kind: .offline, userIDs: ["d3"])),
            ])
        let malformed = machine.receivedFrame(PusherFrame(event: "pusher_internal:watchlist_events", data: "[1]"), now: clock.now)
        #expect(malformed == [.ignoredFrame(event: "pusher_internal:watchlist_events", reason: "malformed watchlist data")])
    }

    @Test func aWatchlistOverTheLimitIsAnErrorAndTheSessionStays() {
        let clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        _ = signedIn(&machine, clock)
        let actions = machine.receivedFrame(
            PusherFrame(event: "pusher:error", data: #"{"message":"Watchlist limit exceeded","code":4302}"#), now: clock.now)
        #expect(actions == [.error(.serverError(message: "Watchlist limit exceeded", code: 4302))])
        #expect(machine.signedInUser?.id == "u1")
    }

    @Test func userDataIsBuiltAndValidated() throws {
        let json = PusherUser.userData(id: "dev-1", userInfo: #"{"a":1}"#, watchlist: ["x", "y"])
        #expect(json == #"{"id":"dev-1","user_info":{"a":1},"watchlist":["x","y"]}"#)
        let user = try PusherUser(userData: json)
        #expect(user.id == "dev-1" && user.watchlist == ["x", "y"] && user.userData == json)
        #expect(UserID.problem(with: String(repeating: "a", count: 200)) == nil)
        #expect(UserID.problem(with: String(repeating: "a", count: 201)) != nil)
        #expect(UserID.problem(with: "") != nil)
        #expect(UserID.problem(with: "caf\u{e9}") != nil)
        #expect(UserID.problem(with: "a#b") != nil)
    }

    @Test func endpointRepliesAreDecoded() throws {
        let auth = try PusherUserAuth(json: #"{"auth":"k:s","user_data":"{\"id\":\"1\"}"}"#)
        #expect(auth == PusherUserAuth(auth: "k:s", userData: #"{"id":"1"}"#))
        #expect(throws: PusherError.self) { try PusherUserAuth(json: #"{"auth":"k:s"}"#) }
        #expect(throws: PusherError.self) { try PusherUserAuth(json: #"{"auth":"k:s","user_data":{"id":"1"}}"#) }
        #expect(throws: PusherError.self) { try PusherUserAuth(json: "nope") }
    }

    @Test func aFailedSignInIsRetriedOnTheSameConnectionWithBackoff() {
        var clock = ManualClock()
        var machine = makeMachine()
        connect(&machine, clock, socketID: "1.1")
        _ = machine.signInRequested(now: clock.now)
        var delays: [Duration] = []
        for _ in 0..<7 {
            _ = machine.userAuthenticationFailed(socketID: "1.1", message: "endpoint down", now: clock.now)
            let due = machine.nextDeadline.map { $0 - clock.now }
            delays.append(due ?? .zero)
            clock.advance((due ?? .zero) - .milliseconds(1))
            #expect(!machine.tick(now: clock.now).contains(.authenticateUser(socketID: "1.1")))
            clock.advance(.milliseconds(1))
            #expect(machine.tick(now: clock.now).contains(.authenticateUser(socketID: "1.1")))
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30)])
        // A success resets the delay.
        _ = signedIn(&machine, clock)
        let closed = machine.transportClosed(code: 4200, now: clock.now)
        reconnectsWithinSpread(&machine, &clock, after: closed)
        _ = machine.receivedFrame(established("2.2"), now: clock.now)
        _ = machine.userAuthenticationFailed(socketID: "2.2", message: "endpoint down", now: clock.now)
        #expect(machine.nextDeadline.map { $0 - clock.now } == .seconds(1))
    }
}
