import Crypto
import Foundation
import PusherProtocol
import Testing

/// Every vector of Pusher's official signature test vectors, `Tests/Fixtures/pusher-signatures.json`.
struct Vectors: Decodable {
    struct HTTP: Decodable {
        let key: String, secret: String, method: String, path: String, timestamp: Int
        let body: String?, params: [String: String]?, string_to_sign: String, auth_signature: String
    }
    struct ChannelAuth: Decodable {
        let key: String, secret: String, socket_id: String, channel: String
        let channel_data: String?, string_to_sign: String, auth: String
        let encryption_master_key_base64: String?, shared_secret_base64: String?
    }
    struct UserAuth: Decodable {
        let key: String, secret: String, socket_id: String, user_data: String, auth: String
    }
    struct Secretbox: Decodable {
        let key_hex: String, plaintext: String, nonce_base64: String, ciphertext_base64: String
    }
    let http_api: [HTTP]
    let channel_auth: [ChannelAuth]
    let user_auth: [UserAuth]
    let secretbox: [Secretbox]

    static func fixtureURL() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/pusher-signatures.json")
    }

    static func load() throws -> Vectors {
        try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: fixtureURL()))
    }
}

@Suite struct SignatureVectorTests {
    @Test func httpAPIVectors() throws {
        let vectors = try Vectors.load().http_api
        #expect(vectors.count == 3)
        for v in vectors {
            let signer = RequestSignature(key: v.key, secret: v.secret)
            // The GET vector carries body_md5 of the empty body (pusher-http-python sends it).
            let body: [UInt8]? = v.body.map { Array($0.utf8) } ?? (v.string_to_sign.contains("body_md5") ? [] : nil)
            let params = (v.params ?? [:]).map { ($0.key, $0.value) }
            let signed = signer.signedParameters(method: v.method, path: v.path, params: params, body: body, timestamp: v.timestamp)
            #expect(RequestSignature.stringToSign(method: v.method, path: v.path, params: signed) == v.string_to_sign)
            #expect(signed.last?.0 == "auth_signature")
            #expect(signed.last?.1 == v.auth_signature)
            // The server side accepts it, and refuses any tampering.
            #expect(signer.verify(method: v.method, path: v.path, params: signed, body: body ?? [], now: v.timestamp + 599) == nil)
            #expect(
                signer.verify(method: v.method, path: v.path, params: signed, body: body ?? [], now: v.timestamp + 601)
                    == .timestampExpired(timestamp: v.timestamp, now: v.timestamp + 601))
            #expect(
                signer.verify(method: v.method, path: v.path + "x", params: signed, body: body ?? [], now: v.timestamp)
                    == .signatureMismatch)
            let wrongSecret = RequestSignature(key: v.key, secret: v.secret + "!")
            #expect(
                wrongSecret.verify(method: v.method, path: v.path, params: signed, body: body ?? [], now: v.timestamp) == .signatureMismatch
            )
            if let b = body, !b.isEmpty {
                #expect(
                    signer.verify(method: v.method, path: v.path, params: signed, body: b + [0x20], now: v.timestamp) == .bodyMD5Mismatch)
            }
        }
    }

    @Test func verifyReportsMissingAndForeignParameters() {
        let signer = RequestSignature(key: "k", secret: "s")
        var signed = signer.signedParameters(method: "POST", path: "/apps/1/events", body: Array("{}".utf8), timestamp: 100)
        #expect(
            RequestSignature(key: "other", secret: "s").verify(
                method: "POST", path: "/apps/1/events", params: signed, body: Array("{}".utf8), now: 100) == .unknownKey("k"))
        signed.removeAll { $0.0 == "body_md5" }
        #expect(
            signer.verify(method: "POST", path: "/apps/1/events", params: signed, body: Array("{}".utf8), now: 100) == .missing("body_md5"))
        #expect(signer.verify(method: "POST", path: "/apps/1/events", params: [], body: [], now: 100) == .missing("auth_key"))
    }

    @Test func channelAuthVectors() throws {
        let vectors = try Vectors.load().channel_auth
        #expect(vectors.count == 4)
        for v in vectors {
            #expect(
                PusherAuth.channelStringToSign(socketID: v.socket_id, channel: v.channel, channelData: v.channel_data) == v.string_to_sign)
            #expect(
                PusherAuth.channelAuth(key: v.key, secret: v.secret, socketID: v.socket_id, channel: v.channel, channelData: v.channel_data)
                    == v.auth)
            #expect(
                PusherAuth.verifyChannelAuth(
                    v.auth, key: v.key, secret: v.secret, socketID: v.socket_id, channel: v.channel, channelData: v.channel_data))
            #expect(
                !PusherAuth.verifyChannelAuth(
                    v.auth, key: v.key, secret: v.secret, socketID: v.socket_id + "1", channel: v.channel, channelData: v.channel_data))
            if let master = v.encryption_master_key_base64, let expected = v.shared_secret_base64 {
                let key = try #require(Data(base64Encoded: master))
                #expect(key.count == 32)
                #expect(Data(PusherAuth.sharedSecret(channel: v.channel, masterKey: key)).base64EncodedString() == expected)
            }
        }
    }

    @Test func userAuthVectors() throws {
        let vectors = try Vectors.load().user_auth
        #expect(vectors.count == 2)
        for v in vectors {
            #expect(PusherAuth.userAuth(key: v.key, secret: v.secret, socketID: v.socket_id, userData: v.user_data) == v.auth)
        }
    }

    @Test func secretboxKeyDerivationVector() throws {
        // The secretbox vector's key is SHA-256 of two byte strings, the same rule as shared_secret.
        let v = try #require(Vectors.load().secretbox.first)
        let key = PusherAuth.sharedSecret(
            channel: "pvUPIk0YG6MnxCEMIUUVFrbDmQwbhICXUcy", masterKey: Array("OTk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5".utf8))
        #expect(key.map { String(format: "%02x", $0) }.joined() == v.key_hex)
    }
}
