import NIOSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The certificate and key pusher-local serves `https://` and `wss://` with (`--tls-cert`,
/// `--tls-key`; docs/contract.md §6). Loaded and checked once, at startup, so a bad file stops
/// the server before it listens, with an error naming the file.
public struct PusherLocalTLS: Sendable {
    /// The PEM file of the certificate chain (server certificate first).
    public let certificateFile: String
    /// The PEM file of the private key.
    public let keyFile: String
    /// What the TLS handler is built from.
    let serverConfiguration: TLSConfiguration

    /// Reads and checks both PEM files: readable, a certificate chain and a private key in them,
    /// and a key that belongs to the certificate.
    public static func load(certificateFile: String, keyFile: String) throws(PusherLocalError) -> PusherLocalTLS {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(try readFile(certificateFile, what: "TLS certificate"))
        } catch let error as PusherLocalError {
            throw error
        } catch {
            throw PusherLocalError("TLS certificate \(certificateFile): not a PEM certificate (\(error))")
        }
        if chain.isEmpty { throw PusherLocalError("TLS certificate \(certificateFile): no PEM certificate in it") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: try readFile(keyFile, what: "TLS key"), format: .pem)
        } catch let error as PusherLocalError {
            throw error
        } catch {
            throw PusherLocalError("TLS key \(keyFile): not a PEM private key (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        // On stop, an idle keep-alive client (the `pusher` library's session) never answers
        // close_notify; the default 5 s wait would make every stop take 5 s.
        configuration.shutdownTimeout = .milliseconds(500)
        do {
            // Builds the context once now: a key that does not match the certificate fails here.
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw PusherLocalError("TLS key \(keyFile) does not fit the certificate \(certificateFile) (\(error))")
        }
        return PusherLocalTLS(certificateFile: certificateFile, keyFile: keyFile, serverConfiguration: configuration)
    }

    /// The whole file, or an error naming it and the system's reason (missing, unreadable).
    static func readFile(_ path: String, what: String) throws(PusherLocalError) -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw PusherLocalError("\(what) \(path): cannot read it (\(String(cString: strerror(errno))))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes += chunk[..<count]
            if count < chunk.count { break }
            if bytes.count > 1 << 20 { throw PusherLocalError("\(what) \(path): larger than 1 MiB, not a PEM file") }
        }
        if ferror(file) != 0 { throw PusherLocalError("\(what) \(path): cannot read it (\(String(cString: strerror(errno))))") }
        return bytes
    }
}
