import PusherProtocol

/// Streams of updates and PusherSwift-style callback bindings.
extension PusherClient {
    // MARK: streams

    /// Everything, in one ordered stream: events of every channel, presence changes,
    /// subscription results, connection state changes and errors.
    public func updates(bufferingPolicy: AsyncStream<PusherUpdate>.Continuation.BufferingPolicy = .unbounded)
        -> AsyncStream<PusherUpdate>
    {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherUpdate.self, bufferingPolicy: bufferingPolicy)
        addSink(.updates(continuation))
        return stream
    }

    /// Everything, like ``updates(bufferingPolicy:)``, handed over in batches: each
    /// ``PusherUpdateBatches/next()`` returns all that arrived since the last one (for a consumer
    /// that must keep up with a busy connection).
    public func updateBatches() -> PusherUpdateBatches {
        let batches = PusherUpdateBatches()
        addSink(.batches(batches))
        return batches
    }

    /// Events of every channel (and connection-wide events).
    public func events() -> AsyncStream<PusherEvent> { events(channel: nil) }

    func events(channel: String?) -> AsyncStream<PusherEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherEvent.self)
        addSink(.events(channel: channel, continuation))
        return stream
    }

    func presenceChanges(channel: String?) -> AsyncStream<PusherPresenceChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherPresenceChange.self)
        addSink(.presence(channel: channel, continuation))
        return stream
    }

    /// Connection state changes.
    public func connectionStates() -> AsyncStream<PusherConnectionStateChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherConnectionStateChange.self)
        addSink(.states(continuation))
        return stream
    }

    /// Errors, including failed subscriptions.
    public func errors() -> AsyncStream<PusherError> {
        let (stream, continuation) = AsyncStream.makeStream(of: PusherError.self)
        addSink(.errors(continuation))
        return stream
    }

    func addSink(_ sink: Sink) {
        // No `onTermination` handler: it would take our lock from the task-cancellation path
        // (under the cancelled task's status lock) while a reader holding our lock resumes that
        // task — a lock-order inversion that can stall the cooperative pool. Ended streams are
        // removed instead when a yield reports `.terminated`.
        state.withLock { state in
            state.sinks[state.nextID] = sink
            state.nextID += 1
        }
    }

    // MARK: callback bindings (PusherSwift style)

    /// Calls `callback` for every event named `eventName` (or every event when `nil`) on any
    /// channel. Returns the binding id for ``unbind(_:)``.
    @discardableResult
    public func bind(eventName: String? = nil, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        bind(channel: nil, eventName: eventName, callback: callback)
    }

    func bind(channel: String?, eventName: String?, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.bindings[id] = Binding(channel: channel, eventName: eventName, callback: callback)
            return String(id)
        }
    }

    /// Removes the binding with this id.
    public func unbind(_ callbackID: String) {
        guard let id = Int(callbackID) else { return }
        _ = state.withLock { $0.bindings.removeValue(forKey: id) }
    }

    /// Removes every client-wide binding (channel bindings stay).
    public func unbindAll() {
        state.withLock { state in state.bindings = state.bindings.filter { $0.value.channel != nil } }
    }

    func unbindAll(channel: String) {
        state.withLock { state in state.bindings = state.bindings.filter { $0.value.channel != channel } }
    }
}
