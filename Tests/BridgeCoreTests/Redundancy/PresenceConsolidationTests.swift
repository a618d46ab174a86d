import Testing

@testable import BridgeCore

/// Presence over N connections (docs/pusher-merge.md, "Presence"): a member is present while any
/// connection holding the channel lists them.
@Suite struct PresenceConsolidationTests {
    static let ann = PresenceMember(userID: "ann", infoJSON: #"{"n":1}"#)
    static let bob = PresenceMember(userID: "bob")
    static let cy = PresenceMember(userID: "cy")

    @Test func withOneConnectionEveryChangePassesThrough() {
        // Expected: exactly what the connection reported, nothing kept.
        var presence = PresenceConsolidation(connections: 1)
        let result1 = presence.subscribed("presence-a", connection: 0, members: [Self.ann])
        #expect(result1 == [.subscribed("presence-a", members: [Self.ann])])
        let result2 = presence.added("presence-a", connection: 0, member: Self.bob)
        #expect(result2 == [.added("presence-a", Self.bob)])
        let result3 = presence.removed("presence-a", connection: 0, userID: "bob")
        #expect(result3 == [.removed("presence-a", userID: "bob")])
        let result4 = presence.removed("presence-a", connection: 0, userID: "bob")
        #expect(result4 == [.removed("presence-a", userID: "bob")])
        #expect(presence.members(of: "presence-a").isEmpty)
    }

    @Test func theFirstConnectionGivesTheListTheSecondOnlyWhatIsNew() {
        // Expected: connection 0's list as is; connection 1's list adds only cy, whom 0 did not list.
        var presence = PresenceConsolidation(connections: 2)
        #expect(
            presence.subscribed("presence-a", connection: 0, members: [Self.ann, Self.bob]) == [
                .subscribed("presence-a", members: [Self.ann, Self.bob])
            ])
        #expect(
            presence.subscribed("presence-a", connection: 1, members: [Self.bob, Self.cy, Self.ann]) == [.added("presence-a", Self.cy)])
        #expect(presence.members(of: "presence-a").map(\.userID) == ["ann", "bob", "cy"])
    }

    @Test func aMemberAddedIsReportedOnceAndRemovedWhenTheLastConnectionSaysSo() {
        // Expected: added by the first connection to say so; removed only when both have.
        var presence = PresenceConsolidation(connections: 2)
        _ = presence.subscribed("presence-a", connection: 0, members: [Self.ann])
        _ = presence.subscribed("presence-a", connection: 1, members: [Self.ann])
        let result5 = presence.added("presence-a", connection: 1, member: Self.bob)
        #expect(result5 == [.added("presence-a", Self.bob)])
        let result6 = presence.added("presence-a", connection: 0, member: Self.bob)
        #expect(result6.isEmpty)
        let result7 = presence.removed("presence-a", connection: 0, userID: "bob")
        #expect(result7.isEmpty)
        let result8 = presence.removed("presence-a", connection: 1, userID: "bob")
        #expect(result8 == [.removed("presence-a", userID: "bob")])
        // A removal nobody listed is ignored.
        let result9 = presence.removed("presence-a", connection: 1, userID: "zed")
        #expect(result9.isEmpty)
    }

    @Test func oneConnectionsDropRemovesNobodyTheOtherLists() {
        // Expected: connection 0 goes; 1 still lists ann and bob: no removal. cy was only 0's: removed.
        var presence = PresenceConsolidation(connections: 2)
        _ = presence.subscribed("presence-a", connection: 0, members: [Self.ann, Self.bob])
        _ = presence.subscribed("presence-a", connection: 1, members: [Self.ann, Self.bob])
        _ = presence.added("presence-a", connection: 0, member: Self.cy)
        let result10 = presence.connectionLost(0, channel: "presence-a", stillHeld: true)
        #expect(result10 == [.removed("presence-a", userID: "cy")])
        #expect(presence.members(of: "presence-a").map(\.userID) == ["ann", "bob"])
        // Back: its list adds nobody new.
        let result11 = presence.subscribed("presence-a", connection: 0, members: [Self.ann, Self.bob])
        #expect(result11.isEmpty)
    }

    @Test func theLastConnectionsDropForgetsTheChannelAndTheNextListIsWhole() {
        // Expected: no removals when nobody holds the channel (the mirror keeps what it shows);
        // the next holder's list goes to the mirror whole, which compares it with what it shows.
        var presence = PresenceConsolidation(connections: 2)
        _ = presence.subscribed("presence-a", connection: 0, members: [Self.ann, Self.bob])
        let result12 = presence.connectionLost(0, channel: "presence-a", stillHeld: false)
        #expect(result12.isEmpty)
        #expect(presence.members(of: "presence-a").isEmpty)
        let result13 = presence.subscribed("presence-a", connection: 1, members: [Self.bob])
        #expect(result13 == [.subscribed("presence-a", members: [Self.bob])])
    }

    @Test func aResubscriptionReplacesThatConnectionsList() {
        // Expected: connection 1 resubscribes without bob: bob stays (0 lists him); without ann,
        // whom only 1 listed: ann removed.
        var presence = PresenceConsolidation(connections: 2)
        _ = presence.subscribed("presence-a", connection: 0, members: [Self.bob])
        _ = presence.subscribed("presence-a", connection: 1, members: [Self.ann, Self.bob])
        #expect(
            presence.subscribed("presence-a", connection: 1, members: [Self.cy]) == [
                .removed("presence-a", userID: "ann"), .added("presence-a", Self.cy),
            ])
        #expect(presence.members(of: "presence-a").map(\.userID) == ["bob", "cy"])
    }

    @Test func aChannelLeftIsForgotten() {
        var presence = PresenceConsolidation(connections: 3)
        _ = presence.subscribed("presence-a", connection: 2, members: [Self.ann])
        presence.channelLeft("presence-a")
        #expect(presence.members(of: "presence-a").isEmpty)
        let result14 = presence.subscribed("presence-a", connection: 0, members: [Self.bob])
        #expect(result14 == [.subscribed("presence-a", members: [Self.bob])])
    }
}
