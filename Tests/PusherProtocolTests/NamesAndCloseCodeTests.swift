import PusherProtocol
import Testing

@Suite struct NamesAndCloseCodeTests {
    @Test(arguments: [
        ("my-channel", ChannelKind.public, false),
        ("private-x", .private, false),
        ("presence-room", .presence, false),
        ("private-encrypted-x", .privateEncrypted, false),
        ("cache-x", .public, true),
        ("private-cache-x", .private, true),
        ("private-encrypted-cache-x", .privateEncrypted, true),
        ("presence-cache-x", .presence, true),
    ])
    func channelKinds(name: String, kind: ChannelKind, cache: Bool) {
        #expect(ChannelName(name).kind == kind)
        #expect(ChannelName(name).isCache == cache)
        #expect(ChannelName(name).problem == nil)
    }

    @Test func channelNameRules() {
        #expect(ChannelName.problem(with: "A-Za_z0-9=@,.;") == nil)
        #expect(ChannelName.problem(with: "") == "channel name is empty")
        #expect(ChannelName.problem(with: "a b")?.contains("' '") == true)
        #expect(ChannelName.problem(with: "a/b")?.contains("'/'") == true)
        #expect(ChannelName.problem(with: "#server-to-user-1") != nil)
        #expect(ChannelName.problem(with: "é") != nil)
        #expect(ChannelName.problem(with: String(repeating: "a", count: 164)) == nil)
        #expect(ChannelName.problem(with: String(repeating: "a", count: 165)) != nil)
        #expect(ChannelKind.private.allowsClientEvents && ChannelKind.presence.allowsClientEvents)
        #expect(!ChannelKind.public.allowsClientEvents && !ChannelKind.privateEncrypted.allowsClientEvents)
    }

    @Test func eventNameRules() {
        #expect(EventName.problem(with: "new-price") == nil)
        #expect(EventName.problem(with: "pusher:x") != nil)
        #expect(EventName.problem(with: "pusher_internal:x") != nil)
        #expect(EventName.problem(with: String(repeating: "e", count: 200)) == nil)
        #expect(EventName.problem(with: String(repeating: "e", count: 201)) != nil)
        #expect(EventName.isClientEvent("client-x") && !EventName.isClientEvent("x"))
        // Code units decide, as in pusher-js: the `-` glued to a combining mark is still `client-`.
        #expect(EventName.isClientEvent("client-\u{301}x"))
        #expect(EventName.isProtocolEvent("pusher:\u{301}x"))
        #expect("$\u{59C}".hasUTF8Prefix("$") && !"$\u{59C}".hasPrefix("$"))
    }

    @Test func socketIDs() {
        #expect(SocketID.isValid("123.456"))
        #expect(!SocketID.isValid("123"))
        #expect(!SocketID.isValid("123.") && !SocketID.isValid(".1") && !SocketID.isValid("1.2.3") && !SocketID.isValid("a.1"))
    }

    @Test(arguments: [
        (UInt16(4000), CloseCodeAction.doNotRetryUnchanged), (4001, .doNotRetryUnchanged), (4099, .doNotRetryUnchanged),
        (4100, .backoff), (4199, .backoff),
        (4200, .reconnectImmediately), (4201, .reconnectImmediately), (4299, .reconnectImmediately),
        (4300, .backoffUnknown), (1000, .backoffUnknown), (1006, .backoffUnknown),
    ])
    func closeCodeClasses(code: UInt16, action: CloseCodeAction) {
        #expect(PusherCloseCode(code).action == action)
    }

    @Test func closeCodeDescriptions() {
        #expect(PusherCloseCode.appDoesNotExist.description == "4001 (application does not exist)")
        #expect(PusherCloseCode(4999).reason == "close code 4999")
    }
}
