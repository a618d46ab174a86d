import Testing

@testable import PusherChannels

/// ``ProtocolEventData``: the JSON of the protocol's own events.
@Suite struct ProtocolEventDataTests {
    @Test func connectionEstablishedNeedsAValidSocketID() {
        #expect(
            ProtocolEventData.connectionEstablished(from: #"{"socket_id":"1.2","activity_timeout":30}"#)
                == .init(socketID: "1.2", activityTimeoutSeconds: 30))
        #expect(
            ProtocolEventData.connectionEstablished(from: #"{"socket_id":"1.2"}"#)
                == .init(socketID: "1.2", activityTimeoutSeconds: nil))
        // A string activity_timeout is not a number.
        #expect(
            ProtocolEventData.connectionEstablished(from: #"{"socket_id":"1.2","activity_timeout":"30"}"#)
                == .init(socketID: "1.2", activityTimeoutSeconds: nil))
        #expect(ProtocolEventData.connectionEstablished(from: #"{"socket_id":"nope"}"#) == nil)
        #expect(ProtocolEventData.connectionEstablished(from: #"{"socket_id":12.3}"#) == nil)
        #expect(ProtocolEventData.connectionEstablished(from: nil) == nil)
    }

    @Test func subscriptionErrorReadsErrorOrMessageAndStatusOrCode() {
        #expect(
            ProtocolEventData.subscriptionError(channel: "c", data: #"{"type":"AuthError","error":"nope","status":401}"#)
                == .subscriptionFailed(channel: "c", message: "nope", code: 401))
        #expect(
            ProtocolEventData.subscriptionError(channel: "c", data: #"{"message":"full","code":"4100"}"#)
                == .subscriptionFailed(channel: "c", message: "full", code: 4100))
        #expect(ProtocolEventData.subscriptionError(channel: "c", data: "plain") == .subscriptionFailed(channel: "c", message: "plain"))
        #expect(
            ProtocolEventData.subscriptionError(channel: "c", data: nil)
                == .subscriptionFailed(channel: "c", message: "subscription_error"))
    }

    @Test func presenceMembersFollowIDsThenHashWithoutDuplicates() throws {
        let members = try ProtocolEventData.presenceMembers(
            from: #"{"presence":{"ids":["b","a","b"],"hash":{"a":1,"c":"x","b":null},"count":3}}"#
        ).get()
        #expect(
            members
                == [PusherMember(userID: "b"), PusherMember(userID: "a", userInfo: "1"), PusherMember(userID: "c", userInfo: #""x""#)])
    }

    @Test func meIsTheListedEntryOrTheChannelData() {
        let listed = [PusherMember(userID: "me", userInfo: #"{"v":2}"#)]
        #expect(ProtocolEventData.me(channelData: #"{"user_id":"me","user_info":{"v":1}}"#, members: listed) == listed[0])
        #expect(
            ProtocolEventData.me(channelData: #"{"user_id":"me","user_info":{"v":1}}"#, members: [])
                == PusherMember(userID: "me", userInfo: #"{"v":1}"#))
        #expect(ProtocolEventData.me(channelData: nil, members: listed) == nil)
    }
}
