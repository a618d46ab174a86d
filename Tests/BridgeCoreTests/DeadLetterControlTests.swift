import Foundation
import Testing

@testable import BridgeCore

/// The dead-letter store's keys and the control socket's request grammar (docs/contract.md §8.3).
@Suite struct DeadLetterConfigTests {
    @Test func defaultsAndValues() throws {
        let plain = try Fixture.parse(Fixture.config())
        #expect(plain.bridges[0].maxDeadLetters == 10_000)
        #expect(plain.daemon.controlSocket == .default)
        #expect(plain.daemon.controlSocketPath(environment: [:]) == "/var/lib/pusher-mqtt-bridge/control.sock")
        #expect(plain.daemon.controlSocketPath(environment: ["RUNTIME_DIRECTORY": "/run/pmb:/run/other"]) == "/run/pmb/control.sock")

        let set = try Fixture.parse(
            "[daemon]\nstate_dir = \"/srv/state/\"\ncontrol_socket = \"sock/c.sock\"\n"
                + Fixture.config().replacingOccurrences(of: "name = \"factory\"", with: "name = \"factory\"\nmax_dead_letters = 5"))
        #expect(set.bridges[0].maxDeadLetters == 5)
        #expect(set.daemon.controlSocketPath(environment: ["RUNTIME_DIRECTORY": "/run/x"]) == "/etc/sock/c.sock")

        let off = try Fixture.parse("[daemon]\ncontrol_socket = \"\"\n" + Fixture.config())
        #expect(off.daemon.controlSocketPath(environment: [:]) == nil)
        let defaultUnderState = try Fixture.parse("[daemon]\nstate_dir = \"/srv/state/\"\n" + Fixture.config())
        #expect(defaultUnderState.daemon.controlSocketPath(environment: [:]) == "/srv/state/control.sock")
    }

    @Test func badValuesAreRefusedAtTheirKey() {
        let config = Fixture.config().replacingOccurrences(of: "name = \"factory\"", with: "name = \"factory\"\nmax_dead_letters = 0")
        #expect(
            Fixture.errors(config) == ["/etc/bridges.conf:3: error: bridge.factory.max_dead_letters: 0 is out of range; must be 1…10000000"]
        )
        let text = Fixture.config().replacingOccurrences(of: "name = \"factory\"", with: "name = \"factory\"\nmax_dead_letters = \"many\"")
        #expect(Fixture.errors(text).count == 1)
        #expect(
            Fixture.errors(text).first?.hasPrefix("/etc/bridges.conf:3: error: bridge.factory.max_dead_letters: expected an integer")
                == true)
        #expect(
            Fixture.errors("[daemon]\ncontrol_socket = 7\n" + Fixture.config()).first?.hasPrefix(
                "/etc/bridges.conf:2: error: daemon.control_socket") == true)
    }

    @Test func aChangedBoundRestartsTheBridge() throws {
        let old = try Fixture.parse(Fixture.config())
        let new = try Fixture.parse(
            Fixture.config().replacingOccurrences(of: "name = \"factory\"", with: "name = \"factory\"\nmax_dead_letters = 7"))
        let plan = ReloadPlan(old: old, new: new)
        #expect(plan.restarted.map(\.name) == ["factory"])
        #expect(plan.rulesChanged.isEmpty)
    }
}

@Suite struct ControlRequestTests {
    func parse(_ text: String) -> Result<ControlRequest, ControlRequestError> { ControlRequest.parse(Array(text.utf8)) }

    @Test func validRequests() throws {
        #expect(try parse("ping\n").get() == .ping)
        #expect(try parse("redrive all\n").get() == .redrive(.all(bridge: nil)))
        #expect(try parse("redrive all bridge=factory").get() == .redrive(.all(bridge: "factory")))
        #expect(try parse("redrive code=invalid_channel bridge=b-1\r\n").get() == .redrive(.code("invalid_channel", bridge: "b-1")))
        #expect(
            try parse("redrive factory:3 factory:1  other:2 factory:3").get()
                == .redrive(
                    .ids([
                        DeadLetterID(bridge: "factory", number: 3), DeadLetterID(bridge: "factory", number: 1),
                        DeadLetterID(bridge: "other", number: 2),
                    ])))
        #expect(try parse("purge all").get() == .purge(.all(bridge: nil)))
        #expect(try parse("purge factory:9").get() == .purge(.ids([DeadLetterID(bridge: "factory", number: 9)])))
    }

    @Test func everyRequestReadsBackItsOwnLine() throws {
        let requests: [ControlRequest] = [
            .ping, .redrive(.all(bridge: nil)), .redrive(.all(bridge: "f")), .redrive(.code("rejected", bridge: nil)),
            .purge(.ids([DeadLetterID(bridge: "f", number: 1), DeadLetterID(bridge: "g", number: 18_446_744_073_709_551_615)])),
        ]
        for request in requests { #expect(try ControlRequest.parse(Array(request.line.utf8)).get() == request) }
    }

    @Test func badInputIsRefusedWithAReason() {
        let bad: [(String, String)] = [
            ("", "empty request"),
            ("\n", "empty request"),
            ("hello", "unknown request \"hello\""),
            ("ping now", "ping takes no arguments"),
            ("redrive", "redrive needs letter ids"),
            ("purge code=rejected", "purge takes no code="),
            ("redrive factory:0", "is not a letter id"),
            ("redrive factory:-1", "is not a letter id"),
            ("redrive Factory:1", "is not a letter id"),
            ("redrive factory:18446744073709551616", "is not a letter id"),
            ("redrive :1", "is not a letter id"),
            ("redrive all please", "only bridge=B may follow"),
            ("redrive all bridge=a bridge=b", "only bridge=B may follow"),
            ("redrive all bridge=NO", "is not a bridge name"),
            ("redrive code=Bad", "code must be"),
            ("redrive code=", "code must be"),
            ("redrive all\tbridge=a", "control character"),
            ("redrive all\nredrive all\n", "control character"),
        ]
        for (text, reason) in bad {
            guard case .failure(let error) = parse(text) else {
                Issue.record("accepted: \(text.debugDescription)")
                continue
            }
            #expect(error.message.contains(reason), "\(text.debugDescription): \(error.message)")
        }
        #expect(throws: ControlRequestError.self) { try ControlRequest.parse([0x72, 0xFF, 0xFE]).get() }
        #expect(throws: ControlRequestError.self) {
            try ControlRequest.parse(Array(repeating: UInt8(ascii: "a"), count: ControlRequest.maxBytes + 1)).get()
        }
    }
}
