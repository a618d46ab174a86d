import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// ``SubscriptionTable``: the channels in the order asked for, their subscription states on the
/// current connection, and who is blamed for a refused subscribe.
@Suite struct SubscriptionTableTests {
    /// Against a plain array (the order a list of requests gives): random requests and leaves
    /// over 300 names, so that names come and go, come back, and the order list is compacted many
    /// times. After every step the names and the count agree with the model, and the order list
    /// stays within its bound (at most twice the live channels, + 64): leaving one channel never
    /// costs more than O(1) amortised — an ordered dictionary's O(n) removal made a bridge leaving
    /// 30,000 channels stall for minutes.
    @Test(arguments: [UInt64(1), 2, 3])
    func theOrderMatchesAListOfRequestsThroughLeavesAndReturns(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var table = SubscriptionTable()
        var model: [String] = []
        for step in 0..<20_000 {
            let name = "c\(Int.random(in: 0..<300, using: &random))"
            // Mostly requests while small, mostly leaves while large: the size swings.
            let leaning = (step / 2_000) % 2 == 0 ? 0.7 : 0.3
            if Double.random(in: 0..<1, using: &random) < leaning {
                _ = table.subscribeRequested(name, auth: nil, socketID: nil)
                if !model.contains(name) { model.append(name) }
            } else {
                _ = table.unsubscribeRequested(name, connected: false)
                model.removeAll { $0 == name }
            }
            #expect(table.count == model.count)
            #expect(table.orderEntries <= 2 * table.count + 65)
            if step % 97 == 0 { #expect(table.names == model) }
        }
        #expect(table.names == model)
    }

    @Test func leavingEveryChannelOfManyEmptiesTheOrderList() {
        var table = SubscriptionTable()
        for n in 0..<50_000 { _ = table.subscribeRequested("private-device-\(n)", auth: nil, socketID: nil) }
        #expect(table.count == 50_000)
        for n in 0..<50_000 { _ = table.unsubscribeRequested("private-device-\(n)", connected: false) }
        #expect(table.count == 0 && table.names.isEmpty)
        #expect(table.orderEntries <= 65)
    }

    @Test func keepsTheOrderAskedForAndIgnoresRepeats() {
        var table = SubscriptionTable()
        for name in ["b", "a", "c"] { _ = table.subscribeRequested(name, auth: nil, socketID: nil) }
        #expect(table.names == ["b", "a", "c"])
        // A repeat, even with an auth, changes nothing.
        _ = table.subscribeRequested("a", auth: PusherChannelAuth(auth: "k:x"), socketID: nil)
        #expect(table.names == ["b", "a", "c"])
        #expect(table["a"]?.providedAuth == nil)
        #expect(table.unsubscribeRequested("a", connected: false) == [])
        #expect(table["a"] == nil)
        _ = table.subscribeRequested("a", auth: nil, socketID: nil)
        #expect(table.names == ["b", "c", "a"])
    }

    @Test func onAConnectionARequestStartsAtOnceAndAnUnsubscribeTellsTheServer() {
        var table = SubscriptionTable()
        #expect(
            table.subscribeRequested("news", auth: nil, socketID: "1.1")
                == [.send(ClientFrame.subscribe(channel: "news", auth: nil, channelData: nil))])
        #expect(table.subscribeRequested("news", auth: nil, socketID: "1.1") == [])
        #expect(table.subscribeRequested("private-a", auth: nil, socketID: "1.1") == [.authorize(channel: "private-a", socketID: "1.1")])
        // Not sent yet: nothing to tell the server.
        #expect(table.unsubscribeRequested("private-a", connected: true) == [])
        #expect(table.unsubscribeRequested("news", connected: true) == [.send(ClientFrame.unsubscribe(channel: "news"))])
        #expect(table.names.isEmpty)
    }

    @Test func aNewConnectionSubscribesPublicAndAuthorizesTheRestInOrder() {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("news", auth: nil, socketID: nil)
        _ = table.subscribeRequested("private-a", auth: nil, socketID: nil)
        _ = table.subscribeRequested("presence-b", auth: nil, socketID: nil)
        let actions = table.connectionEstablished(socketID: "1.1")
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
        _ = table.subscribeRequested("private-a", auth: PusherChannelAuth(auth: "k:mine"), socketID: nil)
        #expect(
            table.connectionEstablished(socketID: "1.1") == [
                .send(ClientFrame.subscribe(channel: "private-a", auth: "k:mine", channelData: nil))
            ])
        table.connectionLost()
        #expect(table["private-a"]?.state == .pending)
        #expect(table.connectionEstablished(socketID: "2.2") == [.authorize(channel: "private-a", socketID: "2.2")])
    }

    @Test func authAnswersCountOnlyForTheSocketTheyWereAskedFor() {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("private-a", auth: nil, socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
        #expect(table.authorizationSucceeded("private-a", socketID: "0.9", auth: PusherChannelAuth(auth: "k:old")) == nil)
        #expect(table.authorizationFailed("private-a", socketID: "0.9", message: "late") == nil)
        #expect(table.authorizationSucceeded("unknown", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x")) == nil)
        let sent = table.authorizationSucceeded("private-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        #expect(sent == [.send(ClientFrame.subscribe(channel: "private-a", auth: "k:x", channelData: nil))])
        // No longer waiting: a second answer is not a subscription's.
        #expect(table.authorizationSucceeded("private-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x")) == nil)
    }

    @Test func authsMissingWhatTheKindNeedsFailTheSubscription() throws {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("presence-a", auth: nil, socketID: nil)
        _ = table.subscribeRequested("private-encrypted-b", auth: nil, socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
        let presenceAnswer = table.authorizationSucceeded("presence-a", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        let presence = try #require(presenceAnswer)
        #expect(presence.count == 1)
        #expect(table["presence-a"]?.state == .failed)
        let encryptedAnswer = table.authorizationSucceeded("private-encrypted-b", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"))
        let encrypted = try #require(encryptedAnswer)
        #expect(encrypted.count == 1)
        #expect(table["private-encrypted-b"]?.state == .failed)
        #expect(table["private-encrypted-b"]?.key.key == nil)
    }

    @Test func anEncryptedChannelsAuthInstallsItsKey() {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("private-encrypted-b", auth: nil, socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
        let key = [UInt8](repeating: 3, count: 32)
        _ = table.authorizationSucceeded("private-encrypted-b", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x", sharedSecret: key))
        #expect(table["private-encrypted-b"]?.key.key == key)
        #expect(table["private-encrypted-b"]?.state == .subscribing)
    }

    @Test func successAndErrorsSetTheState() {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("news", auth: nil, socketID: nil)
        _ = table.subscribeRequested("other", auth: nil, socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
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
        _ = table.subscribeRequested("private-a", auth: PusherChannelAuth(auth: "k:bad"), socketID: nil)
        _ = table.subscribeRequested("private-b", auth: PusherChannelAuth(auth: "k:bad"), socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
        let error = PusherError.serverError(message: "Invalid signature for private-b", code: 4009)
        #expect(table.blamedChannel(for: error, channel: nil) == "private-b")
        #expect(
            table.serverError(error, channel: nil)
                == [
                    .subscriptionFailed(
                        channel: "private-b",
                        error: .subscriptionFailed(
                            channel: "private-b", message: "Invalid signature for private-b", code: 4009))
                ])
        // Two were waiting and the message names neither: no guess.
        _ = table.subscribeRequested("private-c", auth: PusherChannelAuth(auth: "k:bad"), socketID: "1.1")
        let vague = PusherError.serverError(message: "Invalid signature", code: 4009)
        #expect(table.blamedChannel(for: vague, channel: nil) == nil)
        #expect(table.serverError(vague, channel: nil) == [.error(vague)])
    }

    @Test func aPlainServerErrorIsBlamedOnTheOnlyPendingSubscription() {
        var table = SubscriptionTable()
        _ = table.subscribeRequested("private-a", auth: PusherChannelAuth(auth: "k:bad"), socketID: nil)
        _ = table.subscribeRequested("news", auth: nil, socketID: nil)
        _ = table.connectionEstablished(socketID: "1.1")
        _ = table.subscriptionSucceeded("news", data: nil)
        let nullCode = PusherError.serverError(message: "Invalid signature", code: nil)
        #expect(table.blamedChannel(for: nullCode, channel: nil) == "private-a")
        // Another code is not a subscribe refusal.
        #expect(table.blamedChannel(for: .serverError(message: "Over quota", code: 4004), channel: nil) == nil)
        // A channel named in the frame is taken as is, but only a pending subscribe can fail.
        #expect(table.serverError(nullCode, channel: "news") == [.error(nullCode)])
    }
}
