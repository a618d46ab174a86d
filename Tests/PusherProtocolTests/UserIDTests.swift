import PusherProtocol
import Testing

/// User ids and the `#server-to-user-` channel name (docs/pusher-protocol.md §1, "User sign-in").
struct UserIDTests {
    @Test func validIDsUseTheChannelNameAlphabetUpTo200Characters() {
        #expect(UserID.problem(with: "u-1_=@,.;AZaz09") == nil)
        #expect(UserID.problem(with: String(repeating: "x", count: 200)) == nil)
        #expect(UserID.problem(with: String(repeating: "x", count: 201)) == "user id is longer than 200 characters")
        #expect(UserID.problem(with: "") == "user id is empty")
        #expect(UserID.problem(with: "a#b")?.contains("'#'") == true)
        #expect(UserID.problem(with: "a b")?.contains("' '") == true)
        #expect(UserID.problem(with: "caf\u{e9}")?.contains("non-ASCII") == true)
        #expect(UserID.problem(with: "a/b") != nil)
    }

    @Test func serverToUserChannelNames() {
        #expect(UserID.serverToUserChannel("u7") == "#server-to-user-u7")
        #expect(UserID.ofServerToUserChannel("#server-to-user-u7") == "u7")
        #expect(UserID.ofServerToUserChannel("#server-to-user-") == "")
        #expect(UserID.ofServerToUserChannel("server-to-user-u7") == nil)
        #expect(UserID.ofServerToUserChannel("private-u7") == nil)
        // `#` stays outside the channel-name alphabet for every other name.
        #expect(ChannelName.problem(with: "#server-to-user-u7") != nil)
    }

    /// Pusher's documented sign-in example (auth signatures page, "user authentication"):
    /// key 278d425bdf160c739803, secret 7ad3773142a6692b25b8, socket 1234.1234, user_data {"id":"12345"}.
    @Test func pushersDocumentedSigninExample() throws {
        let v = try #require(Vectors.load().user_auth.first { $0.socket_id == "1234.1234" })
        #expect(v.user_data == "{\"id\":\"12345\"}")
        #expect(
            PusherAuth.userAuth(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8", socketID: "1234.1234", userData: v.user_data)
                == "278d425bdf160c739803:4708d583dada6a56435fb8bc611c77c359a31eebde13337c16ab43aa6de336ba")
        #expect(v.auth == "278d425bdf160c739803:4708d583dada6a56435fb8bc611c77c359a31eebde13337c16ab43aa6de336ba")
        #expect(UserID.problem(with: "12345") == nil)
    }

    @Test func theWatchlistLimitIs100() {
        #expect(PusherLimits.watchlistIDs == 100)
        #expect(PusherCloseCode.watchlistLimitExceeded.rawValue == 4302)
    }
}
