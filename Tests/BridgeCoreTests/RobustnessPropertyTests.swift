import Foundation
import PropertyBased
import Testing

@testable import BridgeCore

/// Bad input must produce messages, never a crash (COMMON rules): random damage to the shipped
/// config, random JSON-ish text compared with Foundation's parser.
@Suite("Robustness properties")
struct RobustnessPropertyTests {
    static let shipped: [String] = {
        let text = (try? String(contentsOfFile: Fixture.repositoryRoot + "/bridges.conf", encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }()

    /// Line edits: delete a line, duplicate it, or overwrite one character with a TOML-significant one.
    static let damage = Gen.int(in: 0...10_000).array(of: 1...4)

    @Test func damagedConfigsGiveDiagnosticsNotCrashes() async throws {
        try #require(Self.shipped.count > 50)
        let specials: [Character] = ["[", "]", "=", "\"", "{", "}", "#", "x", "0", ".", "/", "+", "$"]
        await propertyCheck(count: 300, input: Self.damage) { edits in
            var lines = Self.shipped
            for edit in edits {
                let index = edit % lines.count
                switch edit % 3 {
                case 0: lines.remove(at: index)
                case 1: lines.insert(lines[index], at: index)
                default:
                    var characters = Array(lines[index])
                    if !characters.isEmpty { characters[edit % characters.count] = specials[edit % specials.count] }
                    lines[index] = String(characters)
                }
            }
            do {
                _ = try ConfigLoader.parse(lines.joined(separator: "\n"), file: "damaged.conf", environment: Fixture.environment())
            } catch let error as ConfigError {
                #expect(!error.diagnostics.isEmpty)
                for diagnostic in error.diagnostics {
                    #expect(diagnostic.description.hasPrefix("damaged.conf"))
                    #expect(diagnostic.line.map { $0 >= 1 && $0 <= lines.count + 1 } ?? true, "\(diagnostic)")
                }
            } catch {
                Issue.record("unexpected error type: \(error)")
            }
        }
    }

    static let jsonish = Gen.int(in: 0..<24).array(of: 0...16).map { indices in
        let alphabet = [
            "{", "}", "[", "]", "\"", ":", ",", "1", "-", ".", "e", "0", " ", "true", "null", "a", "\\", "\\u00e9", "é", "\n", "\"k\":",
            "2.5", "fals", "\u{1}",
        ]
        return indices.map { alphabet[$0] }.joined()
    }

    @Test func jsonValidatorAgreesWithFoundation() async {
        await propertyCheck(count: 2000, input: Self.jsonish) { text in
            let foundation = (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil
            #expect(JSONText.isValid(text) == foundation, "\(text.debugDescription)")
        }
    }
}
