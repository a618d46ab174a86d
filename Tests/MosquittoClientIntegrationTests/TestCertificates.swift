import Foundation
import TestSupport

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl for one test.
struct TestCertificates: Sendable {
    let directory: String
    var caFile: String { directory + "/ca.crt" }
    var serverCertificate: String { directory + "/server.crt" }
    var serverKey: String { directory + "/server.key" }
    var clientCertificate: String { directory + "/client.crt" }
    var clientKey: String { directory + "/client.key" }
    /// A second CA that signed nothing we use ("wrong CA").
    var otherCAFile: String { directory + "/other-ca.crt" }

    static func make(in directory: String) throws -> TestCertificates {
        let openssl = "/usr/bin/openssl"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Shell.run(
            openssl, ["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=Test CA"],
            in: directory)
        try Shell.run(
            openssl,
            ["req", "-x509"] + ec + ["-keyout", "other-ca.key", "-out", "other-ca.crt", "-days", "2", "-subj", "/CN=Other CA"],
            in: directory)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(toFile: directory + "/client.ext", atomically: true, encoding: .utf8)
        for (name, subject) in [("server", "/CN=127.0.0.1"), ("client", "/CN=test-client")] {
            try Shell.run(
                openssl, ["req"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject], in: directory)
            try Shell.run(
                openssl,
                [
                    "x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", "\(name).crt", "-days", "2", "-extfile", "\(name).ext",
                ], in: directory)
        }
        return TestCertificates(directory: directory)
    }
}
