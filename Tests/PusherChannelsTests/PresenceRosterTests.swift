import Testing

@testable import PusherChannels

/// ``PresenceRoster``: the list from `subscription_succeeded` replaces local state, member
/// events update it, a lost connection empties it.
@Suite struct PresenceRosterTests {
    static let me = #"{"user_id":"bridge","user_info":{"role":"bridge"}}"#

    @Test func subscriptionSucceededSetsMembersAndMe() {
        var roster = PresenceRoster()
        let actions = roster.subscriptionSucceeded(
            channel: "presence-ops",
            data: #"{"presence":{"ids":["1",2,"bridge"],"hash":{"1":{"name":"Ann"},"2":null,"bridge":{"role":"x"}},"count":3}}"#,
            channelData: Self.me)
        let members = [
            PusherMember(userID: "1", userInfo: #"{"name":"Ann"}"#), PusherMember(userID: "2"),
            PusherMember(userID: "bridge", userInfo: #"{"role":"x"}"#),
        ]
        #expect(roster.members == members)
        // `me` is the listed entry when the server lists us.
        #expect(roster.me == PusherMember(userID: "bridge", userInfo: #"{"role":"x"}"#))
        #expect(actions == [.presence(.subscriptionSucceeded(channel: "presence-ops", members: members, me: roster.me))])
    }

    @Test func everySubscriptionSucceededReplacesNeverAppends() {
        var roster = PresenceRoster()
        _ = roster.subscriptionSucceeded(
            channel: "presence-ops", data: #"{"presence":{"ids":["1","2"],"hash":{"1":{},"2":{}},"count":2}}"#, channelData: Self.me)
        _ = roster.memberAdded(channel: "presence-ops", data: #"{"user_id":"3"}"#)
        _ = roster.subscriptionSucceeded(
            channel: "presence-ops", data: #"{"presence":{"ids":["2","4"],"hash":{"2":{},"4":{}},"count":2}}"#, channelData: Self.me)
        #expect(roster.members.map(\.userID) == ["2", "4"])
        // Not listed: `me` comes from our channel_data.
        #expect(roster.me == PusherMember(userID: "bridge", userInfo: #"{"role":"bridge"}"#))
    }

    @Test func malformedPresenceDataEmptiesTheListAndSaysWhy() {
        var roster = PresenceRoster()
        _ = roster.memberAdded(channel: "presence-ops", data: #"{"user_id":"1"}"#)
        let actions = roster.subscriptionSucceeded(channel: "presence-ops", data: "[]", channelData: nil)
        #expect(roster.members.isEmpty)
        #expect(roster.me == nil)
        #expect(
            actions == [
                .ignoredFrame(event: "pusher_internal:subscription_succeeded", reason: "presence data missing or malformed"),
                .presence(.subscriptionSucceeded(channel: "presence-ops", members: [], me: nil)),
            ])
    }

    @Test func memberAddedUpdatesAKnownIDInPlace() {
        var roster = PresenceRoster()
        #expect(
            roster.memberAdded(channel: "p", data: #"{"user_id":7,"user_info":"hi"}"#)
                == [.presence(.memberAdded(channel: "p", member: PusherMember(userID: "7", userInfo: #""hi""#)))])
        #expect(roster.memberAdded(channel: "p", data: #"{"user_id":"7","user_info":{"n":2}}"#) == [])
        #expect(roster.members == [PusherMember(userID: "7", userInfo: #"{"n":2}"#)])
        #expect(
            roster.memberAdded(channel: "p", data: #"{"user_info":{}}"#)
                == [.ignoredFrame(event: "pusher_internal:member_added", reason: "member_added without user_id")])
    }

    @Test func memberRemovedReportsTheEntryItHad() {
        var roster = PresenceRoster()
        _ = roster.memberAdded(channel: "p", data: #"{"user_id":"1","user_info":{"a":1}}"#)
        _ = roster.memberAdded(channel: "p", data: #"{"user_id":"2"}"#)
        #expect(
            roster.memberRemoved(channel: "p", data: #"{"user_id":"1"}"#)
                == [.presence(.memberRemoved(channel: "p", member: PusherMember(userID: "1", userInfo: #"{"a":1}"#)))])
        #expect(roster.memberRemoved(channel: "p", data: #"{"user_id":"1"}"#) == [])
        #expect(
            roster.memberRemoved(channel: "p", data: "nonsense")
                == [.ignoredFrame(event: "pusher_internal:member_removed", reason: "member_removed without user_id")])
        #expect(roster.members.map(\.userID) == ["2"])
    }

    @Test func aLostConnectionEmptiesTheRoster() {
        var roster = PresenceRoster()
        _ = roster.subscriptionSucceeded(
            channel: "p", data: #"{"presence":{"ids":["bridge"],"hash":{"bridge":{}},"count":1}}"#, channelData: Self.me)
        #expect(roster.me != nil)
        roster.connectionLost()
        #expect(roster == PresenceRoster())
    }
}
