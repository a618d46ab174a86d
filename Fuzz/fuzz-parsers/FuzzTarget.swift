import Foundation

/// libFuzzer's per-input callback: the input's bytes; returns 0 (keep) or -1 (do not add to corpus).
typealias FuzzCallback = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32

/// One fuzz target: a parser of ours, fed libFuzzer's inputs, checking invariants that would
/// catch wrong answers, not only crashes.
struct FuzzTarget {
    /// The name on the command line, the corpus folder (`Fuzz/corpus/NAME`) and the dictionary
    /// (`Fuzz/dictionaries/NAME.dict`).
    let name: String
    /// What it feeds and what it checks.
    let summary: String
    /// Called by libFuzzer for every input.
    let callback: FuzzCallback

    /// Every target, in the order `make fuzz` runs them.
    static var all: [FuzzTarget] {
        [
            FuzzTarget(
                name: "pusher-frame",
                summary: "client frame decoding + connection state machine (round trip, valid sends, unique members)",
                callback: { data, size in PusherTargets.clientFrames(Input(data, size)) }),
            FuzzTarget(
                name: "pusher-local-frame",
                summary: "pusher-local's inbound frames through AppHub (replies valid and readable by the client)",
                callback: { data, size in PusherTargets.serverFrames(Input(data, size)) }),
            FuzzTarget(
                name: "pusher-local-users",
                summary: "pusher-local's user protocol: signin, #server-to-user-, terminate, watchlists (records and events agree)",
                callback: { data, size in UserTargets.users(Input(data, size)) }),
            FuzzTarget(
                name: "http-reply",
                summary: "auth endpoint + HTTP API replies the client parses (auth round trip, counts)",
                callback: { data, size in PusherTargets.httpReplies(Input(data, size)) }),
            FuzzTarget(
                name: "http-response",
                summary: "HTTP API client connections: server bytes through NIOHTTP1 + the exchange handler (always completes)",
                callback: { data, size in HTTPTargets.responses(Input(data, size)) }),
            FuzzTarget(
                name: "http-body",
                summary: "pusher-local request bodies: events/batch_events to delivered frames (data kept exactly)",
                callback: { data, size in PusherTargets.requestBodies(Input(data, size)) }),
            FuzzTarget(
                name: "config",
                summary: "bridges.conf TOML loading (no abort, diagnostics inside the file, rule tables compile)",
                callback: { data, size in CoreTargets.config(Input(data, size)) }),
            FuzzTarget(
                name: "template",
                summary: "rule templates: parse, re-serialise round trip, rendering keeps placeholders in one level",
                callback: { data, size in CoreTargets.template(Input(data, size)) }),
            FuzzTarget(
                name: "topic",
                summary: "topic trie vs. an independent reference matcher; level escaping round trip",
                callback: { data, size in CoreTargets.topics(Input(data, size)) }),
            FuzzTarget(
                name: "json",
                summary: "the shared JSON tokenizer vs. its views (bridge validator, pusher-local parser, client scanner); re-encoding",
                callback: { data, size in CoreTargets.json(Input(data, size)) }),
            FuzzTarget(
                name: "where",
                summary: "payload filters: parse (columns, rewriting round trip), evaluate (explain, not, inverted negation)",
                callback: { data, size in PayloadTargets.whereExpressions(Input(data, size)) }),
            FuzzTarget(
                name: "json-pointer",
                summary: "JSON pointer syntax and lookups vs. RFC 6901 written out over Foundation's JSONSerialization",
                callback: { data, size in PayloadTargets.jsonPointers(Input(data, size)) }),
            FuzzTarget(
                name: "webhook",
                summary: "webhook requests: signature, body parser round trip, topics one level per value, counts = members",
                callback: { data, size in WebhookTargets.requests(Input(data, size)) }),
            FuzzTarget(
                name: "cluster",
                summary: "cluster membership messages: topics rebuild, payloads round trip, a member holds only wanted channels",
                callback: { data, size in ClusterTargets.messages(Input(data, size)) }),
            FuzzTarget(
                name: "cluster-parts",
                summary: "held snapshots and deltas, discovered-list parts: round trips, holes make sets unknown, splits within 64 KB",
                callback: { data, size in ClusterPartTargets.parts(Input(data, size)) }),
            FuzzTarget(
                name: "last-held",
                summary: "the state directory's last-held file: valid channels only, render/parse round trip, bad lines counted",
                callback: { data, size in CoreTargets.lastHeld(Input(data, size)) }),
            FuzzTarget(
                name: "control-request",
                summary: "the control socket's request lines: accepted ones round trip with valid ids and codes, refusals bounded",
                callback: { data, size in ControlTargets.requests(Input(data, size)) }),
        ]
    }

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// One fuzz input.
struct Input {
    let bytes: [UInt8]

    init(_ data: UnsafePointer<UInt8>?, _ size: Int) {
        bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    }

    /// The bytes as text; invalid UTF-8 is repaired, as a WebSocket text frame or a validated
    /// file would never carry it.
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The text's lines (each line one frame, filter, topic, …).
    var lines: [String] { text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
}

/// An invariant does not hold: print why and abort, so libFuzzer saves the input as a crash.
func violated(_ message: String) -> Never {
    FileHandle.standardError.write(Data("INVARIANT VIOLATED: \(message)\n".utf8))
    abort()
}
