import Testing

@testable import PusherChannels

/// ``EncryptedChannelKey``: one key refetch on a decrypt failure, events queued meanwhile, no
/// refetch loop.
@Suite struct EncryptedChannelKeyTests {
    static let channel = "private-encrypted-box"
    static let oldKey = [UInt8](repeating: 1, count: 32)
    static let newKey = [UInt8](repeating: 2, count: 32)

    static func frame(_ plaintext: String, key: [UInt8], event: String = "reading") throws -> PusherFrame {
        let data = try #require(SecretBox.sealEventData(plaintext, key: key))
        return PusherFrame(event: event, channel: channel, data: data)
    }

    static func delivered(_ data: String, event: String = "reading") -> PusherConnectionStateMachine.Action {
        .deliver(PusherEvent(name: event, channel: channel, data: data))
    }

    static func failed(_ event: String) -> PusherConnectionStateMachine.Action {
        .error(.decryptionFailed(channel: channel, event: event))
    }

    @Test func decryptsWithTheInstalledKey() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        #expect(key.received(try Self.frame("21.5", key: Self.oldKey), channel: Self.channel, socketID: "1.1") == [Self.delivered("21.5")])
        #expect(key.refetch == .none)
    }

    @Test func aFailureRefetchesOnceQueuesThenDeliversWithTheNewKey() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        // The server rotated its master key: the first event fails and asks for the key again.
        let first = try Self.frame("1", key: Self.newKey, event: "a")
        #expect(key.received(first, channel: Self.channel, socketID: "1.1") == [.authorize(channel: Self.channel, socketID: "1.1")])
        #expect(key.isRefetching)
        // Meanwhile events wait, in order.
        #expect(key.received(try Self.frame("2", key: Self.newKey, event: "b"), channel: Self.channel, socketID: "1.1") == [])
        #expect(key.received(try Self.frame("3", key: Self.newKey, event: "c"), channel: Self.channel, socketID: "1.1") == [])
        let actions = key.refetchSucceeded(sharedSecret: Self.newKey, channel: Self.channel)
        #expect(actions == [Self.delivered("1", event: "a"), Self.delivered("2", event: "b"), Self.delivered("3", event: "c")])
        #expect(key.key == Self.newKey)
        #expect(key.refetch == .none)
        // Not refetching: a late answer changes nothing.
        #expect(key.refetchSucceeded(sharedSecret: Self.oldKey, channel: Self.channel) == [])
        #expect(key.key == Self.newKey)
    }

    @Test func aRefetchThatDoesNotHelpIsNotRepeated() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        let garbage = PusherFrame(event: "a", channel: Self.channel, data: #"{"nonce":"x","ciphertext":"y"}"#)
        #expect(key.received(garbage, channel: Self.channel, socketID: "1.1") == [.authorize(channel: Self.channel, socketID: "1.1")])
        #expect(key.refetchSucceeded(sharedSecret: Self.oldKey, channel: Self.channel) == [Self.failed("a")])
        #expect(key.refetch == .spent)
        // Spent: failures are errors, no second authorize…
        #expect(key.received(garbage, channel: Self.channel, socketID: "1.1") == [Self.failed("a")])
        // …until one decrypts again, which re-arms the refetch.
        #expect(key.received(try Self.frame("ok", key: Self.oldKey), channel: Self.channel, socketID: "1.1") == [Self.delivered("ok")])
        #expect(key.received(garbage, channel: Self.channel, socketID: "1.1") == [.authorize(channel: Self.channel, socketID: "1.1")])
    }

    @Test func aFailedRefetchFailsEveryQueuedEvent() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        _ = key.received(try Self.frame("1", key: Self.newKey, event: "a"), channel: Self.channel, socketID: "1.1")
        _ = key.received(try Self.frame("2", key: Self.newKey, event: "b"), channel: Self.channel, socketID: "1.1")
        #expect(key.refetchFailed(channel: Self.channel) == [Self.failed("a"), Self.failed("b")])
        #expect(key.refetch == .spent)
        #expect(key.refetchFailed(channel: Self.channel) == [])
    }

    @Test func theQueueIsBounded() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        let frame = try Self.frame("x", key: Self.newKey)
        _ = key.received(frame, channel: Self.channel, socketID: "1.1")
        for _ in 1..<EncryptedChannelKey.maxQueuedWhileRefetching {
            #expect(key.received(frame, channel: Self.channel, socketID: "1.1") == [])
        }
        #expect(key.received(frame, channel: Self.channel, socketID: "1.1") == [Self.failed("reading")])
    }

    @Test func aLostConnectionDropsTheRefetchButKeepsTheKey() throws {
        var key = EncryptedChannelKey()
        key.subscriptionAuthorized(sharedSecret: Self.oldKey)
        _ = key.received(try Self.frame("1", key: Self.newKey), channel: Self.channel, socketID: "1.1")
        key.connectionLost()
        #expect(!key.isRefetching)
        #expect(key.key == Self.oldKey)
        // A new connection's auth installs the key and starts over.
        key.subscriptionAuthorized(sharedSecret: Self.newKey)
        #expect(key.received(try Self.frame("2", key: Self.newKey), channel: Self.channel, socketID: "2.2") == [Self.delivered("2")])
    }

    @Test func noKeyYetIsAFailureThatRefetches() {
        var key = EncryptedChannelKey()
        let frame = PusherFrame(event: "a", channel: Self.channel, data: "{}")
        #expect(key.received(frame, channel: Self.channel, socketID: "1.1") == [.authorize(channel: Self.channel, socketID: "1.1")])
    }
}
