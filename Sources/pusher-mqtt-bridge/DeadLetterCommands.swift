import ArgumentParser
import BridgeCore
import BridgeDaemon

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `dead-letters list|show|redrive|purge` (docs/contract.md §8.3). `list`, `show` and
/// `redrive --dry-run` read the stores where the config file puts them, daemon or not; `redrive`
/// asks the running daemon over its control socket; `purge` removes letters itself when no daemon
/// holds the stores, else through the socket.
struct DeadLetters: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead-letters",
        abstract: "List, show, redrive or purge the dead letters each bridge keeps.",
        subcommands: [DeadLettersList.self, DeadLettersShow.self, DeadLettersRedrive.self, DeadLettersPurge.self])
}

/// `--bridge`, shared.
struct BridgeFilter: ParsableArguments {
    @Option(help: "Only this bridge.") var bridge: String?

    func check(_ configuration: BridgeConfiguration, path: String) throws {
        if let bridge, configuration.bridge(named: bridge) == nil {
            throw ValidationError("no bridge named \"\(bridge)\" in \(path)")
        }
    }
}

/// Reads the stores, saying on stderr when damaged records were skipped.
func keptLetters(_ configuration: BridgeConfiguration, only: String?) throws -> [DeadLetterFiles.Letter] {
    let (letters, skipped) = try DeadLetterFiles.read(configuration, only: only)
    if skipped > 0 { StandardStream.error.write("note: \(skipped) damaged record(s) in the dead-letter store skipped\n") }
    return letters
}

/// `ID…`: `BRIDGE:N`, or `N` alone when the config has one bridge.
func letterIDs(_ words: [String], in configuration: BridgeConfiguration) throws -> [DeadLetterID] {
    try words.map { word in
        if let id = DeadLetterID(word) { return id }
        if configuration.bridges.count == 1, let number = UInt64(word), number > 0 {
            return DeadLetterID(bridge: configuration.bridges[0].name, number: number)
        }
        throw ValidationError("\"\(word)\" is not a letter id; expected BRIDGE:N as `dead-letters list` prints it")
    }
}

struct DeadLettersList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the kept dead letters, oldest first.")

    @OptionGroup var options: ConfigOption
    @OptionGroup var filter: BridgeFilter
    @Option(help: "Only letters with this code (invalid_channel, rejected, …).") var code: String?
    @Option(help: "Only letters of this rule.") var rule: String?
    @Flag(help: "One JSON object per line.") var json = false

    func run() throws {
        let configuration = try options.load()
        try filter.check(configuration, path: options.path)
        let letters = try keptLetters(configuration, only: filter.bridge).filter {
            (code == nil || $0.stored.code == code) && (rule == nil || $0.stored.rule == rule)
        }
        for letter in letters {
            print(json ? DeadLetterFiles.jsonLine(letter) : DeadLetterFiles.summaryLine(letter))
        }
        if !json, letters.isEmpty { print("no dead letters kept") }
    }
}

struct DeadLettersShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one kept dead letter with its payload.")

    @OptionGroup var options: ConfigOption
    @Argument(help: "The letter's id (BRIDGE:N).") var id: String

    func run() throws {
        let configuration = try options.load()
        guard let wanted = try letterIDs([id], in: configuration).first else { return }
        guard let letter = try keptLetters(configuration, only: wanted.bridge).first(where: { $0.id == wanted }) else {
            StandardStream.error.write("no dead letter \(wanted) is kept\n")
            throw ExitCode.failure
        }
        print(DeadLetterFiles.details(letter))
    }
}

/// `ID… | --all | --code C`, shared by redrive and purge.
struct LetterSelection: ParsableArguments {
    @Argument(help: "Letter ids (BRIDGE:N).") var ids: [String] = []
    @Flag(help: "Every kept letter (of --bridge, if given).") var all = false

    func selection(code: String?, bridge: String?, in configuration: BridgeConfiguration) throws -> DeadLetterSelection {
        let given = (ids.isEmpty ? 0 : 1) + (all ? 1 : 0) + (code == nil ? 0 : 1)
        guard given == 1 else { throw ValidationError("give letter ids, --all\(code == nil ? "" : " or --code C"), exactly one of them") }
        if all { return .all(bridge: bridge) }
        if let code { return .code(code, bridge: bridge) }
        if bridge != nil { throw ValidationError("--bridge goes with --all or --code, not with ids") }
        return .ids(try letterIDs(ids, in: configuration))
    }
}

/// The daemon's reply, as far as the command line reads it.
struct ControlAnswer: Decodable {
    var ok: Bool
    var error: String?
    var delivered: Int?
    var dead_lettered: Int?
    var unmatched: Int?
    var unsettled: Int?
    var busy: Int?
    var purged: Int?
    var missing: [String]?
}

/// Sends a request to the daemon the config file names; a clear message and exit 69 when none answers.
func askDaemon(_ request: ControlRequest, configuration: BridgeConfiguration, timeout: Int) throws -> ControlAnswer {
    let paths = configuration.daemon.controlSocketCandidates(environment: ProcessInfo.processInfo.environment)
    guard !paths.isEmpty else {
        StandardStream.error.write("the control socket is turned off ([daemon] control_socket = \"\"): cannot reach the daemon\n")
        throw ExitStatus.unavailable
    }
    var line: String?
    var failures: [String] = []
    for path in paths where line == nil {
        do {
            line = try ControlSocketIO.exchange(request.line, path: path, timeoutSeconds: timeout)
        } catch {
            guard error.isConnectFailure else {
                // Sent but unanswered: the daemon goes on with it; the next candidate must not get it twice.
                StandardStream.error.write(
                    "the daemon took the request but gave no answer within \(timeout) s (\(error)); it goes on with it: "
                        + "see `dead-letters list` and pusher_mqtt_bridge_dead_letters_redriven_total\n")
                throw ExitCode.failure
            }
            failures.append("\(error)")
        }
    }
    guard let line else {
        StandardStream.error.write(
            "cannot reach the daemon's control socket (\(failures.joined(separator: "; "))). Is pusher-mqtt-bridge running with "
                + "this config? Nothing was changed; the letters are still kept.\n")
        throw ExitStatus.unavailable
    }
    guard let answer = try? JSONDecoder().decode(ControlAnswer.self, from: Data(line.utf8)) else {
        StandardStream.error.write("unexpected reply from the daemon: \(line)")
        throw ExitCode.failure
    }
    guard answer.ok else {
        StandardStream.error.write("the daemon refused: \(answer.error ?? "no reason given")\n")
        throw ExitCode.failure
    }
    return answer
}

struct DeadLettersRedrive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redrive",
        abstract: "Route kept dead letters again through the running daemon's current rules.",
        discussion: "Each letter leaves the store once what it became is delivered or dead-lettered again (as a new letter).")

    @OptionGroup var options: ConfigOption
    @OptionGroup var letters: LetterSelection
    @Option(help: "Every kept letter with this code.") var code: String?
    @OptionGroup var filter: BridgeFilter
    @Flag(help: "Only say what each letter would become with the current rules; change nothing.") var dryRun = false
    @Option(help: "Seconds to wait for the daemon's answer.") var timeout = 300

    func run() throws {
        let configuration = try options.load()
        try filter.check(configuration, path: options.path)
        let selection = try letters.selection(code: code, bridge: filter.bridge, in: configuration)
        if dryRun {
            let now = UTCTimestamp(millisecondsSince1970: Int64((Date().timeIntervalSince1970 * 1000).rounded()))
            let chosen = try keptLetters(configuration, only: nil).filter { DeadLetterFiles.matches($0, selection) }
            for letter in chosen { print(DeadLetterFiles.dryRun(letter, in: configuration, now: now)) }
            print("\(chosen.count) letter(s); nothing was changed (--dry-run)")
            return
        }
        let answer = try askDaemon(.redrive(selection), configuration: configuration, timeout: timeout)
        print(
            "redriven: \(answer.delivered ?? 0) delivered, \(answer.dead_lettered ?? 0) dead-lettered again (kept as new letters), "
                + "\(answer.unmatched ?? 0) taken by no rule (kept), \(answer.unsettled ?? 0) not settled (kept)")
        if let busy = answer.busy, busy > 0 { print("\(busy) letter(s) left alone: another redrive has them") }
        if let missing = answer.missing, !missing.isEmpty { print("not kept: \(missing.joined(separator: " "))") }
    }
}

struct DeadLettersPurge: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "purge", abstract: "Delete kept dead letters for good.")

    @OptionGroup var options: ConfigOption
    @OptionGroup var letters: LetterSelection
    @OptionGroup var filter: BridgeFilter
    @Option(help: "Seconds to wait for the daemon's answer.") var timeout = 60

    func run() throws {
        let configuration = try options.load()
        try filter.check(configuration, path: options.path)
        let selection = try letters.selection(code: nil, bridge: filter.bridge, in: configuration)
        let removed: Int
        let missing: [String]
        if let direct = try DeadLetterFiles.purge(selection, in: configuration) {
            (removed, missing) = direct
        } else {
            // A running daemon holds the stores: it removes them.
            let answer = try askDaemon(.purge(selection), configuration: configuration, timeout: timeout)
            (removed, missing) = (answer.purged ?? 0, answer.missing ?? [])
        }
        print("purged \(removed) letter(s)")
        if !missing.isEmpty { print("not kept: \(missing.joined(separator: " "))") }
    }
}
