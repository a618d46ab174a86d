import Durability
import Locking
import Logging

/// The outbox's spool: the periodic sync (the `fdatasync` outside the outbox lock), the degraded
/// spool's log lines, and the close.
extension Outbox {
    /// Forces spooled appends to disk (called about once a second; see `SpoolFsyncPolicy`), and
    /// while the spool is degraded first tries to write what waits in memory into it.
    ///
    /// Only the quick part runs under the outbox lock: taking the sync point (which writes the
    /// acknowledgement record into the page cache, in order with the appends). The `fdatasync`
    /// runs on the spools' sync thread without the lock — appends, hand-outs and acknowledgements
    /// go on meanwhile, and what they write belongs to the next sync — and its result is recorded
    /// under the lock again (a failed flush is retried by the next sync, and degrades the spool).
    func sync() async {
        let point: SpoolSyncPoint? = state.withLock { state in
            guard let spool = state.spool else { return nil }
            state.backlog.resumeSpool()
            do {
                let point = try spool.prepareSync()
                guard !point.isEmpty else {
                    spool.finishSync(point, flushed: true)
                    return nil
                }
                return point
            } catch {
                syncFailed(error, backlog: state.backlog)
                return nil
            }
        }
        if let point {
            var failure: (any Error)?
            do { try await flushSpool(point) } catch { failure = error }
            state.withLock { state in
                state.spool?.finishSync(point, flushed: failure == nil)
                if let failure { syncFailed(failure, backlog: state.backlog) }
            }
        }
        reportDegradedSpool(now: .now)
    }

    /// A disk failure degrades the spool (reported by ``reportDegradedSpool(now:)``); anything
    /// else (the sync thread not running) is logged here.
    private func syncFailed(_ error: any Error, backlog: DeliveryBacklog) {
        if let error = error as? SpoolError, error.isDiskFailure {
            backlog.spoolFailed(error)
        } else {
            logger.warning("spool sync failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
        }
    }

    /// Logs the degraded spool: when it degrades, then at most once a minute with the count of
    /// messages in memory only, and when it resumes.
    private func reportDegradedSpool(now: ContinuousClock.Instant) {
        let (line, failure): (SpoolDegradedLog<ContinuousClock.Instant>.Line?, SpoolError?) = state.withLock { state in
            guard state.spool != nil else { return (nil, nil) }
            let line = state.degradedLog.observed(
                degraded: state.backlog.isSpoolDegraded, memoryOnly: state.backlog.memoryOnlyCount, now: now)
            return (line, state.backlog.spoolFailure)
        }
        switch line {
        case .degraded(let memoryOnly):
            logger.error(
                "spool degraded: new messages wait in memory only (lost on a crash) until the disk takes writes again",
                metadata: ["outbox": "\(name)", "memory_only": "\(memoryOnly)", "error": "\(failure.map { "\($0)" } ?? "")"])
        case .stillDegraded(let memoryOnly):
            logger.warning(
                "spool still degraded",
                metadata: ["outbox": "\(name)", "memory_only": "\(memoryOnly)", "error": "\(failure.map { "\($0)" } ?? "")"])
        case .resumed:
            logger.notice("spool resumed: every message is on disk again", metadata: ["outbox": "\(name)"])
        case nil:
            break
        }
    }

    /// Closes the spool file (what is still pending stays on disk for the next start). A last
    /// ``sync()`` first, so the close itself finds nothing to wait for on the disk (unless
    /// something was written in between). Ends the redrive's waits (``waitUntilSettled(through:deadline:)``).
    func closeSpool() async {
        await sync()
        let settleWaiters = state.withLock { state in
            if state.spool != nil, state.backlog.memoryOnlyCount > 0 {
                logger.error(
                    "spool degraded at close: messages held in memory only are lost",
                    metadata: ["outbox": "\(name)", "messages": "\(state.backlog.memoryOnlyCount)"])
            }
            do { try state.spool?.close() } catch {
                logger.warning("spool close failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            state.spool = nil
            state.released = true
            return state.takeSettleWaiters()
        }
        settleWaiters.resume()
    }
}
