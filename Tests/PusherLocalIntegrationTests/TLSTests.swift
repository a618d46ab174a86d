import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import PusherLocal
import Testing

/// A temp dir with a test CA, a server certificate for `localhost`/127.0.0.1 signed by it, and a
/// few broken files, made with the `openssl` CLI.
struct TLSTestFiles {
    let directory: URL
    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    var caFile: String { path("ca.pem") }
    var certificateFile: String { path("server.pem") }
    var keyFile: String { path("server.key") }
    /// A key of its own, not the certificate's.
    var otherKeyFile: String { path("ca.key") }
    /// Text that is no PEM at all.
    var garbageFile: String { path("garbage.pem") }

    static func make() async throws -> TLSTestFiles {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pusher-local-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = """
            set -e
            cd "\(directory.path)"
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 1 \
              -subj "/CN=pusher-local test CA" 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr \
              -subj "/CN=localhost" 2>/dev/null
            printf "subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n" > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile ext.cnf 2>/dev/null
            printf "this is not a PEM file\\n" > garbage.pem
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        // Waits without blocking a cooperative thread.
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        try #require(status == 0, "openssl failed with status \(status)")
        return TLSTestFiles(directory: directory)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// A client configuration that trusts only the test CA (verification on, host names checked).
    var clientTLS: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile)
        // After a WebSocket close the client waits for pusher-local's close_notify, which does
        // not come: with swift-nio-ssl's default 5 s every test socket would take 5 s to close.
        tls.shutdownTimeout = .milliseconds(500)
        return tls
    }
}

/// pusher-local with `--tls-cert`/`--tls-key`: one port serves `wss://` and `https://`, and bad
/// files are refused before anything listens, naming the file.
@Suite(.timeLimit(.minutes(1)))
struct TLSTests {
    @Test func servesWSSAndHTTPSOnOnePortVerifiedAgainstTheCA() async throws {
        let files = try await TLSTestFiles.make()
        defer { files.remove() }
        var configuration = testConfiguration()
        configuration.tls = try PusherLocalTLS.load(certificateFile: files.certificateFile, keyFile: files.keyFile)
        let clientTLS = files.clientTLS
        try await withServer(configuration) { running in
            #expect(running.webSocketURL().hasPrefix("wss://127.0.0.1:"))
            #expect(running.httpURL == "https://127.0.0.1:\(running.port)")
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: clientTLS))
            do {
                // `localhost`, not 127.0.0.1: swift-nio-ssl refuses an IP address as the TLS server name (SNI).
                try await withSocket("wss://localhost:\(running.port)/app/app-key?protocol=7", tls: clientTLS) { socket in
                    let socketID = try await establish(socket)
                    try await subscribe(socket, socketID: socketID, channel: "news")
                    // The signed HTTP API over https, on the same port, reaches the wss subscriber.
                    let reply = try await apiRequest(
                        running, method: "POST", path: "/apps/1/events", body: #"{"name":"update","channel":"news","data":"tls"}"#,
                        client: client)
                    #expect(reply.status == 200)
                    let event = try await socket.waitFor("update")
                    #expect(event.dataString == "tls")
                }
                // The host name is checked too: `localhost` is in the certificate.
                let stats = try await client.execute(
                    HTTPClientRequest(url: "https://localhost:\(running.port)/pusher-local/apps/1/stats"), timeout: .seconds(10))
                #expect(stats.status.code == 200)
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }

    @Test func aClientThatDoesNotTrustTheCAIsRefusedAndPlainHTTPGetsNoAnswer() async throws {
        let files = try await TLSTestFiles.make()
        defer { files.remove() }
        var configuration = testConfiguration()
        configuration.tls = try PusherLocalTLS.load(certificateFile: files.certificateFile, keyFile: files.keyFile)
        try await withServer(configuration) { running in
            // The system trust store does not know the test CA. (AsyncHTTPClient retries until the
            // deadline, then reports the handshake's error.)
            let untrusted = await thrownError {
                try await HTTPClient.shared.execute(
                    HTTPClientRequest(url: running.httpURL + "/pusher-local/apps/1/stats"), timeout: .seconds(2))
            }
            #expect(untrusted is NIOSSLError)
            #expect("\(untrusted.map { "\($0)" } ?? "")".contains("CERTIFICATE_VERIFY_FAILED"))
            // Plain http:// to the TLS port is not served.
            let plain = await thrownError {
                let response = try await HTTPClient.shared.execute(
                    HTTPClientRequest(url: "http://127.0.0.1:\(running.port)/pusher-local/apps/1/stats"), timeout: .seconds(5))
                _ = try await response.body.collect(upTo: 1 << 20)
            }
            #expect(plain as? HTTPClientError == .remoteConnectionClosed)
        }
    }

    @Test func withoutTLSTheURLsStayPlain() async throws {
        try await withServer(testConfiguration()) { running in
            #expect(running.webSocketURL().hasPrefix("ws://127.0.0.1:"))
            #expect(running.httpURL.hasPrefix("http://127.0.0.1:"))
        }
    }

    @Test func badFilesAreRefusedNamingTheFile() async throws {
        let files = try await TLSTestFiles.make()
        defer { files.remove() }
        func failure(_ certificate: String, _ key: String) -> String? {
            do {
                _ = try PusherLocalTLS.load(certificateFile: certificate, keyFile: key)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(failure(files.certificateFile, files.keyFile) == nil)
        let missing = files.path("missing.pem")
        #expect(failure(missing, files.keyFile) == "TLS certificate \(missing): cannot read it (No such file or directory)")
        #expect(failure(files.certificateFile, missing) == "TLS key \(missing): cannot read it (No such file or directory)")
        #expect(failure(files.directory.path, files.keyFile) == "TLS certificate \(files.directory.path): cannot read it (Is a directory)")
        let garbledCertificate = try #require(failure(files.garbageFile, files.keyFile))
        #expect(garbledCertificate.hasPrefix("TLS certificate \(files.garbageFile): not a PEM certificate"))
        // A key file given as the certificate holds no certificate.
        #expect(try #require(failure(files.keyFile, files.keyFile)).hasPrefix("TLS certificate \(files.keyFile): not a PEM certificate"))
        let garbledKey = try #require(failure(files.certificateFile, files.garbageFile))
        #expect(garbledKey.hasPrefix("TLS key \(files.garbageFile): not a PEM private key"))
        let otherKey = try #require(failure(files.certificateFile, files.otherKeyFile))
        #expect(otherKey.hasPrefix("TLS key \(files.otherKeyFile) does not fit the certificate \(files.certificateFile)"))
    }
}

/// What `body` threw, or `nil` when it returned.
private func thrownError(_ body: () async throws -> some Any) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}
