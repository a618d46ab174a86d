import Testing

@testable import BridgeCore

@Suite("Presence mirror event sequences")
struct PresenceMirrorTests {
    typealias Action = PresenceMirror.Action
    let rule = PresenceMirrorRule(channel: "presence-operators", topic: "dash/ops", qos: 1)

    func member(_ topic: String, _ json: String) -> Action {
        .publishRetained(topic: "dash/ops/members/" + topic, payload: Array(json.utf8), qos: 1)
    }
    func clear(_ topic: String) -> Action { .clearRetained(topic: "dash/ops/members/" + topic, qos: 1) }
    func count(_ n: Int) -> Action { .publishRetained(topic: "dash/ops/count", payload: Array(String(n).utf8), qos: 1) }

    @Test func subscriptionPublishesMembersAndCountWithoutTheBridge() {
        var mirror = PresenceMirror(rule: rule, ownUserID: "bridge")
        let actions = mirror.subscriptionSucceeded(members: [
            PresenceMember(userID: "bob", infoJSON: #"{"name":"Bob"}"#), PresenceMember(userID: "bridge", infoJSON: "{}"),
            PresenceMember(userID: "ann", infoJSON: nil),
        ])
        #expect(actions == [member("ann", "{}"), member("bob", #"{"name":"Bob"}"#), count(2)])
    }

    @Test func addRemoveAndDuplicates() {
        var mirror = PresenceMirror(rule: rule, ownUserID: "bridge")
        _ = mirror.subscriptionSucceeded(members: [])
        #expect(mirror.memberAdded(PresenceMember(userID: "42", infoJSON: "null")) == [member("42", "{}"), count(1)])
        #expect(mirror.memberAdded(PresenceMember(userID: "42", infoJSON: "null")) == [])
        #expect(mirror.memberAdded(PresenceMember(userID: "42", infoJSON: #"{"a":1}"#)) == [member("42", #"{"a":1}"#)])
        #expect(mirror.memberAdded(PresenceMember(userID: "bridge")) == [])
        #expect(mirror.memberRemoved(userID: "42") == [clear("42"), count(0)])
        #expect(mirror.memberRemoved(userID: "42") == [])
    }

    @Test func userIDsAreEscapedIntoOneLevel() {
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        #expect(mirror.subscriptionSucceeded(members: [PresenceMember(userID: "a/b+#")]) == [member("a%2Fb%2B%23", "{}"), count(1)])
        #expect(mirror.memberRemoved(userID: "a/b+#") == [clear("a%2Fb%2B%23"), count(0)])
    }

    @Test func reconnectClearsMembersWhoLeftWhileAwayWithoutDuplicates() {
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        _ = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "ann"), PresenceMember(userID: "bob")])
        #expect(mirror.pusherDisconnected() == [])
        // Events while disconnected cannot arrive; stale ones from a dying socket are ignored.
        #expect(mirror.memberAdded(PresenceMember(userID: "zed")) == [])
        #expect(mirror.memberRemoved(userID: "ann") == [])
        let actions = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "bob"), PresenceMember(userID: "cat")])
        #expect(actions == [member("bob", "{}"), member("cat", "{}"), clear("ann"), count(2)])
        #expect(mirror.currentMembers.map(\.userID) == ["bob", "cat"])
    }

    @Test func restartGhostsFoundBeforeTheMemberListAreClearedWithIt() {
        // A new daemon process: the broker still holds retained members from the last run.
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/old", payload: Array("{}".utf8)) == [])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/ann", payload: Array("{}".utf8)) == [])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/gone", payload: []) == [])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/count", payload: Array("3".utf8)) == [])
        let actions = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "ann")])
        #expect(actions == [member("ann", "{}"), clear("old"), count(1)])
    }

    @Test func restartGhostsFoundAfterTheMemberListAreClearedAtOnce() {
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        _ = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "ann")])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/ann", payload: Array("{}".utf8)) == [])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/ghost", payload: Array("{}".utf8)) == [clear("ghost")])
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/a/b", payload: Array("{}".utf8)) == [])
        #expect(mirror.retainedMessageFound(topic: "elsewhere/members/x", payload: Array("{}".utf8)) == [])
        // The broker's bytes decide (MQTTTopicText): a level that starts with a combining mark
        // is still a level under `members/`.
        #expect(mirror.retainedMessageFound(topic: "dash/ops/members/\u{301}x", payload: Array("{}".utf8)) == [clear("\u{301}x")])
    }

    @Test func mqttReconnectRepublishesLiveState() {
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        #expect(mirror.mqttConnected() == [])
        _ = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "ann", infoJSON: #"{"x":1}"#)])
        #expect(mirror.mqttConnected() == [member("ann", #"{"x":1}"#), count(1)])
    }

    @Test func retireClearsEverything() {
        var mirror = PresenceMirror(rule: rule, ownUserID: nil)
        _ = mirror.subscriptionSucceeded(members: [PresenceMember(userID: "ann"), PresenceMember(userID: "bob")])
        #expect(mirror.retire() == [clear("ann"), clear("bob"), .clearRetained(topic: "dash/ops/count", qos: 1)])
        #expect(!mirror.isLive)
    }
}
