import PusherProtocol
import Testing

@testable import PusherChannels

/// ``SubscriptionTable``: one ordered dictionary of channels, their subscription states on the
/// current connection, and who is blamed for a refused subscribe.
@Suite struct SubscriptionTableTests {
    @Test func keepsTheOrderAskedForAndIgnoresRepeats() {
        var table = SubscriptionTable()
        #expect(table.add("b", auth: nil) == true)
        #expect(table.add("a", auth: nil) == true)
        #expect(table.add("c", auth: nil) == true)
        #expect(table.add("a", auth: PusherChannelAuth(auth: "k:x")) == false)
        #expect(table.names == ["b", "a", "c"])
        #expect(table["a"]?.providedAuth == nil)
        #expect(table.remove("a")?.name == "a")
        #expect(table.remove("a") == nil)
        #expect(table.add("a", auth: nil) == true)
        #expect(table.names == ["b", "c", "a"])
    }

    @Test func startAllSubscribesPublicAndAuthorizesTheRestInOrder() {
        var table = SubscriptionTable()
        _ = table.add("news", auth: nil)
        _ = table.add("private-a", auth: nil)
        _ = table.add("presence-b", auth: nil)
        let actions = table.startAll(socketID: "1.1")
        #expect(
            actions == [
                .send(ClientFrame.subscribe(channel: "news", auth: nil, channelData: nil)),
                .authorize(channel: "private-a", socketID: "1.1"),
                .authorize(channel: "presence-b", socketID: "1.1"),
            ])
        #expect(table["news"]?.state == .subscribing)
        #expect(table["private-a"]?.state == .authorizing(socketID: "1.1"))
    }

    @Test func aProvidedAuthIsUsedOnceThenTheAuthorizerIsAsked() {
        var table = SubscriptionTable()
        _ = table.add("private-a", auth: PusherChannelAuth(auth: "k:mine"))
        #expect(table.startAll(socketID: "1.1") == [.send(ClientFrame.subscribe(channel: "private-a", auth: "k:mine", channelData: nil))])
        table.connectionLost()
        #expect(table["private-a"]?.state == .pending)
        #expect(table.startAll(socketID: "2.2") == [.authorize(channel: "private-a", socketID: "2.2")])
    }

    @Test func authAnswersCountOnlyForTheSocketTheyWereAskedFor() {
        var table = SubscriptionTable()
        _ = table.add("private-a", auth: nil)
        _ = table.startAll(socketID: "1.1")
        #expect(table.authorized("private-a", socketID: "0.9", auth: PusherChannelAuth(auth: "k:old")) == nil)
        #expect(table.authorizationFailed("private-a", socketID: "0.9", message: "late") == nil)
        #expect(table.authorized("unknown", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x")) == nil)
        let sent = table.authorized("private-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        #expect(sent == [.send(ClientFrame.subscribe(channel: "private-a", auth: "k:x", channelData: nil))])
        // No longer waiting: a second answer is not a subscription's.
        #expect(table.authorized("private-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x")) == nil)
    }

    @Test func authsMissingWhatTheKindNeedsFailTheSubscription() throws {
        var table = SubscriptionTable()
        _ = table.add("presence-a", auth: nil)
        _ = table.add("private-encrypted-b", auth: nil)
        _ = table.startAll(socketID: "1.1")
        let presenceAnswer = table.authorized("presence-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        let presence = try #require(presenceAnswer)
        #expect(presence.count == 1)
        #expect(table["presence-a"]?.state == .failed)
        let encryptedAnswer = table.authorized("private-encrypted-b", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        let encrypted = try #require(encryptedAnswer)
        #expect(encrypted.count == 1)
        #expect(table["private-encrypted-b"]?.state == .failed)
        #expect(table["private-encrypted-b"]?.key.key == nil)
    }

    @Test func anEncryptedChannelsAuthInstallsItsKey() {
        var table = SubscriptionTable()
        _ = table.add("private-encrypted-b", auth: nil)
        _ = table.startAll(socketID: "1.1")
        let key = [UInt8](repeating: 3, count: 32)
        _ = table.authorized("private-encrypted-b", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x", sharedSecret: key))
        #expect(table["private-encrypted-b"]?.key.key == key)
        #expect(table["private-encrypted-b"]?.state == .subscribing)
    }

    @Test func successAndErrorsSetTheState() {
        var table = SubscriptionTable()
        _ = table.add("news", auth: nil)
        _ = table.add("other", auth: nil)
        _ = table.startAll(socketID: "1.1")
        #expect(table.subscriptionSucceeded("news", data: nil) == [.subscriptionSucceeded(channel: "news")])
        #expect(table.isSubscribed("news"))
        #expect(table.subscriptionSucceeded("unknown", data: nil) == nil)
        #expect(
            table.subscriptionError("other", data: #"{"error":"nope","status":401}"#)
                == [.subscriptionFailed(channel: "other", error: .subscriptionFailed(channel: "other", message: "nope", code: 401))])
        #expect(table["other"]?.state == .failed)
        #expect(table.subscriptionError("unknown", data: nil) == nil)
        table.connectionLost()
        #expect(!table.isSubscribed("news"))
        #expect(table.names == ["news", "other"])
    }

    @Test func aPlainServerErrorIsBlamedOnTheSubscriptionItNames() {
        var table = SubscriptionTable()
        _ = table.add("private-a", auth: PusherChannelAuth(auth: "k:bad"))
        _ = table.add("private-b", auth: PusherChannelAuth(auth: "k:bad"))
        _ = table.startAll(socketID: "1.1")
        let error = PusherError.serverError(message: "Invalid signature for private-b", code: 4009)
        #expect(table.blamedChannel(for: error, channel: nil) == "private-b")
        #expect(
            table.serverError(error, channel: nil)
                == [.subscriptionFailed(channel: "private-b", error: .subscriptionFailed(
                    channel: "private-b", message: "Invalid signature for private-b", code: 4009))])
        // Two were waiting and the message names neither: no guess.
        _ = table.add("private-c", auth: PusherChannelAuth(auth: "k:bad"))
        _ = table.startSubscription("private-c", socketID: "1.1")
        let vague = PusherError.serverError(message: "Invalid signature", code: 4009)
        #expect(table.blamedChannel(for: vague, channel: nil) == nil)
        #expect(table.serverError(vague, channel: nil) == [.error(vague)])
    }

    @Test func aPlainServerErrorIsBlamedOnTheOnlyPendingSubscription() {
        var table = SubscriptionTable()
        _ = table.add("private-a", auth: PusherChannelAuth(auth: "k:bad"))
        _ = table.add("news", auth: nil)
        _ = table.startAll(socketID: "1.1")
        _ = table.subscriptionSucceeded("news", data: nil)
        let nullCode = PusherError.serverError(message: "Invalid signature", code: nil)
        #expect(table.blamedChannel(for: nullCode, channel: nil) == "private-a")
        // Another code is not a subscribe refusal.
        #expect(table.blamedChannel(for: .serverError(message: "Over quota", code: 4004), channel: nil) == nil)
        // A channel named in the frame is taken as is, but only a pending subscribe can fail.
        #expect(table.serverError(nullCode, channel: "news") == [.error(nullCode)])
    }
}
