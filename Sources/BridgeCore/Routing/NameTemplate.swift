/// A target name with placeholders, compiled once at config load (docs/contract.md §4):
/// `dash/prices/{event}`, `sensor-{1}`, `{topic}`.
///
/// Placeholders: `{channel}` `{event}` `{user_id}` `{bridge}` for Pusher → MQTT rules, and
/// `{suffix}` for those with a `channel_prefix` (docs/contract.md §7.1);
/// `{1}`…`{n}` (the `+` levels), `{#}` (what `#` matched), `{topic}` and `{bridge}` for
/// MQTT → Pusher rules; `{json:/pointer}` in both (a value inside the payload, docs/contract.md
/// §7.3). `{{` and `}}` write literal braces.
public struct NameTemplate: Sendable, Hashable, CustomStringConvertible {
    /// One piece of a template.
    public enum Segment: Sendable, Hashable {
        /// Text copied as is.
        case literal(String)
        /// `{n}`: the value of the n-th `+` level (1-based).
        case capture(Int)
        /// `{#}`: the levels `#` matched, joined by `/`.
        case multiLevel
        /// `{topic}`: the whole MQTT topic.
        case topic
        /// `{channel}`: the Pusher channel.
        case channel
        /// `{event}`: the Pusher event name.
        case event
        /// `{user_id}`: the sender of a client event on a presence channel.
        case userID
        /// `{bridge}`: the bridge's name.
        case bridge
        /// `{suffix}`: the channel name after the rule's `channel_prefix` (docs/contract.md §7.1).
        case suffix
        /// `{json:/pointer}`: the payload's value at an RFC 6901 pointer (a string's content, a
        /// number's or boolean's JSON text).
        case json(JSONPointer)
    }

    /// Why a template could not be rendered for a message.
    public enum Gap: Sendable, Equatable {
        /// A placeholder has no value (e.g. `{user_id}` on an event without a sender).
        case placeholder(String)
        /// `{json:/…}` found nothing usable: missing, null, an object or an array, or a payload
        /// that is not JSON.
        case jsonValue(JSONPointer)
    }

    /// Which placeholders a template may use, by the direction of its rule.
    public enum Context: Sendable, Hashable {
        /// A topic rendered from a Pusher event.
        case pusherEvent
        /// A topic rendered from a Pusher event on a channel found under a `channel_prefix`:
        /// `{suffix}` as well (docs/contract.md §7.1).
        case discoveredPusherEvent
        /// A channel or event name rendered from an MQTT message matched by a filter with
        /// `captures` `+` levels and, if `multiLevel`, a final `#`.
        case mqttMessage(captures: Int, multiLevel: Bool)
    }

    /// The template as written.
    public let source: String
    /// The compiled pieces.
    public let segments: [Segment]

    public var description: String { source }

    /// The literal text of the template (placeholders removed).
    public var literalText: String {
        segments.reduce(into: "") { text, segment in
            if case .literal(let literal) = segment { text += literal }
        }
    }

    /// The literal prefix before the first placeholder.
    public var literalPrefix: String {
        if case .literal(let literal) = segments.first { return literal }
        return ""
    }

    /// Whether the template has no placeholders.
    public var isConstant: Bool { segments.allSatisfy { if case .literal = $0 { true } else { false } } }

    /// Whether any segment is `segment`.
    public func uses(_ segment: Segment) -> Bool { segments.contains(segment) }

    /// The pointers of its `{json:…}` placeholders, in order.
    public var jsonPointers: [JSONPointer] {
        segments.compactMap { if case .json(let pointer) = $0 { pointer } else { nil } }
    }

    /// Whether rendering reads the payload.
    public var readsPayload: Bool { !jsonPointers.isEmpty }

    /// Compiles `source`, checking every placeholder against `context`.
    public static func parse(_ source: String, context: Context) -> Result<NameTemplate, ConfigValueProblem> {
        var segments: [Segment] = []
        var literal = ""
        var index = source.startIndex
        func flush() {
            if !literal.isEmpty { segments.append(.literal(literal)) }
            literal = ""
        }
        while index < source.endIndex {
            let character = source[index]
            let next = source.index(after: index)
            if character == "{" {
                if next < source.endIndex, source[next] == "{" {
                    literal.append("{")
                    index = source.index(after: next)
                    continue
                }
                guard let close = source[next...].firstIndex(of: "}") else {
                    return .failure(.init("unclosed '{' in \"\(source)\" (write '{{' for a literal brace)"))
                }
                let name = String(source[next..<close])
                switch placeholder(name, context: context, source: source) {
                case .success(let segment):
                    flush()
                    segments.append(segment)
                case .failure(let problem):
                    return .failure(problem)
                }
                index = source.index(after: close)
                continue
            }
            if character == "}" {
                if next < source.endIndex, source[next] == "}" {
                    literal.append("}")
                    index = source.index(after: next)
                    continue
                }
                return .failure(.init("unmatched '}' in \"\(source)\" (write '}}' for a literal brace)"))
            }
            literal.append(character)
            index = next
        }
        flush()
        return .success(NameTemplate(source: source, segments: segments))
    }

    private static func placeholder(_ name: String, context: Context, source: String) -> Result<Segment, ConfigValueProblem> {
        if name.hasPrefix("json:") {
            switch JSONPointer.parse(String(name.dropFirst(5))) {
            case .success(let pointer): return .success(.json(pointer))
            case .failure(let error): return .failure(.init("{\(name)}: not a JSON Pointer (RFC 6901): \(error.message)"))
            }
        }
        switch context {
        case .pusherEvent, .discoveredPusherEvent:
            switch name {
            case "channel": return .success(.channel)
            case "event": return .success(.event)
            case "user_id": return .success(.userID)
            case "bridge": return .success(.bridge)
            case "suffix":
                guard context == .discoveredPusherEvent else {
                    return .failure(.init("{suffix} needs channel_prefix: it is the channel name after the prefix"))
                }
                return .success(.suffix)
            default:
                if Int(name) != nil || name == "#" || name == "topic" {
                    return .failure(
                        .init(
                            "{\(name)} is only available in rules with from = \"mqtt\"; here use {channel}, {event}, {user_id} or {bridge}")
                    )
                }
                return .failure(unknown(name, candidates: ["channel", "event", "user_id", "bridge", "json:/…"]))
            }
        case .mqttMessage(let captures, let multiLevel):
            switch name {
            case "topic": return .success(.topic)
            case "bridge": return .success(.bridge)
            case "#":
                guard multiLevel else {
                    return .failure(.init("{#} needs a filter that ends in '#'"))
                }
                return .success(.multiLevel)
            default:
                if let number = Int(name), name.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                    guard number >= 1 else { return .failure(.init("captures are numbered from {1}")) }
                    guard number <= captures else {
                        let available =
                            captures == 0 ? "has no '+' wildcard" : "has only \(captures) '+' wildcard\(captures == 1 ? "" : "s")"
                        return .failure(.init("{\(number)} does not exist: the filter \(available)"))
                    }
                    return .success(.capture(number))
                }
                if ["channel", "event", "user_id", "suffix"].contains(name) {
                    return .failure(
                        .init("{\(name)} is only available in rules with from = \"pusher\"; here use {1}…{n}, {#}, {topic} or {bridge}"))
                }
                return .failure(unknown(name, candidates: ["topic", "bridge", "1", "#", "json:/…"]))
            }
        }
    }

    private static func unknown(_ name: String, candidates: [String]) -> ConfigValueProblem {
        var message = "unknown placeholder {\(name)}"
        if let suggestion = Spelling.suggestion(for: name, among: candidates) { message += " (did you mean {\(suggestion)}?)" }
        return .init(message)
    }

    /// Renders the template. With `escapingLevels`, every placeholder value is escaped so that it
    /// stays inside one topic level (docs/contract.md §5.1); without, values are inserted as they are and the
    /// caller validates the result (Pusher names have their own syntax, §5.2). `{json:…}` values
    /// are read from `payload` (nil: no payload, so they have no value).
    /// Returns the first placeholder without a value, or nil when the whole template was rendered.
    @inlinable
    public func render(
        into output: inout String, values: TemplateValues, payload: inout PayloadDocument?, escapingLevels: Bool
    ) -> Gap? {
        for segment in segments {
            let value: Substring
            switch segment {
            case .literal(let literal):
                output += literal
                continue
            case .capture(let number):
                guard number <= values.captures.count else { return .placeholder("\(number)") }
                value = values.captures[number - 1]
            case .multiLevel:
                guard let multiLevel = values.multiLevel else { return .placeholder("#") }
                value = multiLevel
            case .topic:
                guard let topic = values.topic else { return .placeholder("topic") }
                value = topic
            case .channel:
                guard let channel = values.channel else { return .placeholder("channel") }
                value = channel
            case .event:
                guard let event = values.event else { return .placeholder("event") }
                value = event
            case .userID:
                guard let userID = values.userID else { return .placeholder("user_id") }
                value = userID
            case .bridge:
                value = values.bridge
            case .suffix:
                guard let suffix = values.suffix else { return .placeholder("suffix") }
                value = suffix
            case .json(let pointer):
                guard let text = payload?.value(at: pointer)?.templateText else { return .jsonValue(pointer) }
                value = Substring(text)
            }
            if escapingLevels {
                TopicLevelEscaping.append(value, to: &output)
            } else {
                output += value
            }
        }
        return nil
    }

    /// Convenience: the rendered string, or `nil` when a placeholder has no value.
    public func render(_ values: TemplateValues, payload: [UInt8]? = nil, escapingLevels: Bool) -> String? {
        var output = ""
        var document = payload.map { PayloadDocument($0) }
        return render(into: &output, values: values, payload: &document, escapingLevels: escapingLevels) == nil ? output : nil
    }
}

/// The values placeholders are filled from, for one message.
public struct TemplateValues: Sendable {
    /// `{1}`…`{n}`.
    public var captures: [Substring]
    /// `{#}`.
    public var multiLevel: Substring?
    /// `{topic}`.
    public var topic: Substring?
    /// `{channel}`.
    public var channel: Substring?
    /// `{event}`.
    public var event: Substring?
    /// `{user_id}`.
    public var userID: Substring?
    /// `{bridge}`.
    public var bridge: Substring
    /// `{suffix}`: the channel name after the rule's `channel_prefix`.
    public var suffix: Substring?

    public init(
        captures: [Substring] = [], multiLevel: Substring? = nil, topic: Substring? = nil, channel: Substring? = nil,
        event: Substring? = nil, userID: Substring? = nil, bridge: Substring, suffix: Substring? = nil
    ) {
        self.suffix = suffix
        self.captures = captures
        self.multiLevel = multiLevel
        self.topic = topic
        self.channel = channel
        self.event = event
        self.userID = userID
        self.bridge = bridge
    }
}
