/// When the spool forces appended records from the page cache to the disk (`fdatasync`).
///
/// Every append is handed to the kernel with `write(2)` before `append` returns, so **every
/// policy survives a crash or SIGKILL of the process**: the page cache belongs to the kernel.
/// The policies differ only in what survives a **power loss or kernel crash**:
///
/// | policy | cost per append | lost on power loss |
/// |---|---|---|
/// | `always` | one `fdatasync` (≈ a disk flush) | nothing that `append` returned for |
/// | `batch(records: n)` | one `fdatasync` per `n` appends | at most the last `n - 1` appends, plus what came after the owner's last `sync()` |
/// | `onSync` (default) | none on the append path | what came after the owner's last ``Spool/sync()`` (the daemon: ≤ 1 s) |
/// | `never` | none | whatever the kernel had not written back yet (Linux: up to ≈ 30 s by default) |
///
/// The default is `onSync` with the owner calling ``Spool/sync()`` about once a second:
/// docs/contract.md §5.6 promises that daemon *restarts* lose nothing (true for every policy); a power
/// loss costing at most ~1 s of messages is the usual trade-off of message brokers (mosquitto's
/// own persistence only writes every `autosave_interval`, Redis' `appendfsync everysec`).
/// `batch(64)` was the default until the bridge benchmark (issue 7) showed its `fdatasync`
/// calls — hundreds a second at 50k messages/s, 0.1–3 ms each on this VM's disk, taken while
/// the direction's lock is held — stalling Pusher → MQTT. Measured with
/// `swift run -c release spool-bench` on the project's 2-core VM (virtual disk, shared with
/// other builds; ranges over 4 runs, 100 B / 1 KiB records): `always` 330–7 400 appends/s,
/// `batch(64)` 14 000–226 000/s, `never` 380 000–1 070 000/s.
///
/// Acknowledgement records are never forced to disk by themselves: losing one only means the
/// records it covered are delivered again after a restart (at-least-once), never lost.
public enum SpoolFsyncPolicy: Sendable, Equatable {
    /// `fdatasync` after every append.
    case always
    /// `fdatasync` after every `records` appends (and on ``Spool/sync()``, rotation and close).
    case batch(records: Int)
    /// `fdatasync` only in ``Spool/sync()`` (the owner's timer: the daemon calls it every
    /// second, on the spools' sync thread) and on ``Spool/close()`` — never on the append path,
    /// where one `fdatasync` (0.1–3 ms on a virtual disk) stalls the whole direction; a segment
    /// rotated out and the new segment's directory entry are flushed by the next sync. A power
    /// loss takes at most the records of the last timer period; a process crash takes nothing.
    case onSync
    /// Never force; only ``Spool/sync()`` flushes.
    case never

    /// The recommended default, see the type's documentation.
    public static let `default` = SpoolFsyncPolicy.onSync
}
