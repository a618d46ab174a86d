import PusherProtocol
import Testing

@testable import PusherLocal

/// The small pure parsers around the server: query strings, app specs, admission of paths.
struct ParsingTests {
    @Test func queryStringsArePercentAndFormDecoded() {
        let pairs = parseQuery("info=user_count%2Csubscription_count&filter_by_prefix=presence-&x=a+b&bad=%zz&empty")
        #expect(pairs.map(\.0) == ["info", "filter_by_prefix", "x", "bad", "empty"])
        #expect(pairs.map(\.1) == ["user_count,subscription_count", "presence-", "a b", "%zz", ""])
        #expect(parseQuery("").isEmpty)
        #expect(splitPathAndQuery("/app/k?protocol=7&x=1") == ("/app/k", "protocol=7&x=1"))
        #expect(splitPathAndQuery("/app/k") == ("/app/k", ""))
    }

    @Test func appSpecsNeedThreeParts() {
        #expect(PusherLocalApp(spec: "2:key:sec:ret") == PusherLocalApp(id: "2", key: "key", secret: "sec:ret"))
        #expect(PusherLocalApp(spec: "2:key") == nil)
        #expect(PusherLocalApp(spec: "2::secret") == nil)
        #expect(PusherLocalApp.demo.description == "1/app-key")
    }

    @Test func configurationProblemsAreListed() {
        var configuration = PusherLocalConfiguration(apps: [.demo, .demo])
        configuration.port = 70000
        configuration.webhookURL = "ftp://x"
        let problems = configuration.problems
        #expect(problems.contains("app ids must be unique"))
        #expect(problems.contains("app keys must be unique"))
        #expect(problems.contains { $0.contains("port 70000") })
        #expect(problems.contains { $0.contains("webhook URL") })
        #expect(PusherLocalConfiguration().problems.isEmpty)
    }

    @Test func streamDataHasTheRequestedSize() throws {
        let padding = Substring(String(repeating: "x", count: 500))
        let data = StreamSpec.data(seq: 7, sentAtNanos: 1_700_000_000_000_000_000, size: 200, padding: padding)
        #expect(data.utf8.count == 200)
        let value = try JSONValue.parse(data)
        #expect(value["seq"] == .number("7"))
        #expect(throws: APIError.self) { try StreamSpec(channel: "bad name", event: nil, count: nil, size: nil, rate: nil) }
        #expect(throws: APIError.self) { try StreamSpec(channel: "c", event: nil, count: "0", size: nil, rate: nil) }
        #expect(throws: APIError.self) { try StreamSpec(channel: "c", event: nil, count: nil, size: "20000", rate: nil) }
    }

    @Test func webhookBodyIsSignedWithTheSecret() {
        let (body, signature) = WebhookSender.request(
            events: [PusherWebhookEvent(name: "channel_occupied", channel: "c")],
            app: .demo,
            timeMillis: 123
        )
        #expect(body == "{\"time_ms\":123,\"events\":[{\"name\":\"channel_occupied\",\"channel\":\"c\"}]}")
        #expect(signature == PusherProtocol.hmacSHA256Hex(secret: "app-secret", message: body))
    }
}
