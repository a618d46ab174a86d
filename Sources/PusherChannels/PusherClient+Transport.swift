import Logging
import NIOCore
import NIOWebSocket
import PusherProtocol
import WSCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The WebSocket, its reader and writer, and the timer that drives the machine's deadlines.
extension PusherClient {
    // MARK: transport

    /// Drives the machine's deadlines: sleeps exactly until ``PusherConnectionStateMachine/nextDeadline``
    /// or until an event brings the deadline earlier (``DeadlineTimer``), then tells the machine
    /// that time passed. No fixed-interval wake-ups; nothing to do while the machine has no deadline.
    func runTimer() async {
        var wakeUps = timerWakeUps.makeAsyncIterator()
        while !Task.isCancelled {
            let deadline = state.withLock { state in
                state.timer.armed(for: state.machine.nextDeadline)
                return state.timer.armedFor
            }
            guard let deadline else {
                // No deadline: sleep until an event sets one (`nil`: cancelled, run() is ending).
                guard await wakeUps.next() != nil else { return }
                continue
            }
            // Whichever comes first: the deadline, or a wake-up for an earlier one. The sleeper
            // reports into the same stream, so this task stays the stream's only reader.
            let wakeUpContinuation = timerWakeUpContinuation
            let woken = await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                    wakeUpContinuation.yield()
                }
                let woken = await wakeUps.next() != nil
                group.cancelAll()
                return woken
            }
            guard woken else { return }
            perform { $0.tick(now: .now) }
        }
    }

    func runTransport() async {
        let (outgoing, continuation) = AsyncStream.makeStream(of: Outgoing.self)
        let transportID = state.withLock { state in
            state.transportID += 1
            state.outgoing = continuation
            state.handshakeChannel = nil
            state.closeRequested = false
            if state.closePending {
                state.closePending = false
                continuation.yield(.close)
            }
            return state.transportID
        }
        /// The connection is open and its opening handshake starts: a drop asked for from now
        /// until the WebSocket runs closes the connection (``State/handshakeChannel``).
        @Sendable func opened(_ channel: any Channel) {
            let closeNow = state.withLock { state -> Bool in
                guard state.transportID == transportID else { return true }
                if state.closeRequested { return true }
                state.handshakeChannel = channel
                return false
            }
            if closeNow { channel.close(promise: nil) }
        }
        /// The WebSocket runs: its writer carries out `.close` from now on.
        @Sendable func upgraded() {
            state.withLock { state in
                if state.transportID == transportID { state.handshakeChannel = nil }
            }
        }
        /// Unregister before telling the machine, so a close it asks for from now on is kept
        /// for the next transport's opening instead of going to this finished one.
        @Sendable func unregister() {
            continuation.finish()
            state.withLock { state in
                if state.transportID == transportID {
                    state.outgoing = nil
                    state.handshakeChannel = nil
                }
            }
        }
        let configuration = PusherWebSocket.Configuration(
            maxFrameSize: options.maxFrameSize, closeTimeout: .seconds(2), validateUTF8: true, sniHostname: options.tlsServerName)
        let maxFrameSize = options.maxFrameSize
        logger.debug("Pusher opening connection", metadata: ["pusher.url": "\(options.url)"])
        do {
            // Our connection set-up around swift-websocket's WebSocket (PusherWebSocket.swift): its
            // own client loses a close sent together with the 101 response.
            let closeFrame = try await PusherWebSocket.connect(
                url: options.url,
                configuration: configuration,
                tlsConfiguration: tlsConfiguration,
                eventLoopGroup: eventLoopGroup,
                logger: logger,
                opened: opened
            ) { inbound, outbound, _ in
                upgraded()
                return try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        for await item in outgoing {
                            switch item {
                            case .text(let text):
                                try await outbound.write(.text(text))
                            case .close:
                                try await outbound.close(.normalClosure, reason: nil)
                                return true
                            }
                        }
                        return false
                    }
                    group.addTask {
                        // Keep reading at all times: swift-websocket answers pings only while
                        // inbound is read (docs/swift-stack.md).
                        for try await message in inbound.messages(maxSize: maxFrameSize) {
                            switch message {
                            case .text(let text): self.received(text)
                            case .binary: self.receivedBinary()
                            }
                        }
                        return false
                    }
                    if try await group.next() == true {
                        // Closed by us: what the server sent before its own close frame still
                        // arrives (the close handshake; bounded by the close timeout), so events
                        // already on their way are not dropped (a reload replacing a connection
                        // lost one that way).
                        _ = try? await group.next()
                        throw ClosedByClient()
                    }
                    group.cancelAll()
                }
            }
            let code = closeFrame.map { UInt16(webSocketErrorCode: $0.closeCode) }
            if let code {
                logger.debug("Pusher connection closed", metadata: ["pusher.close_code": "\(code)"])
            }
            unregister()
            perform { $0.transportClosed(code: code, now: .now) }
        } catch {
            unregister()
            // Cancelled because run() is ending: not a connection failure to report or retry.
            if Task.isCancelled { return }
            perform { $0.transportFailed(message: "\(error)", now: .now) }
        }
    }

    private func received(_ text: String) {
        let now = ContinuousClock.now
        let frame: PusherFrame
        do {
            frame = try PusherFrame.parse(text)
        } catch {
            perform { $0.receivedMalformedFrame(error, now: now) }
            return
        }
        perform { $0.receivedFrame(frame, now: now) }
    }

    private func receivedBinary() {
        let now = ContinuousClock.now
        perform { $0.receivedMalformedFrame(PusherFrameError(message: "binary frame (Pusher uses text frames only)"), now: now) }
    }
}
