"""A newcomer's path as a test: the stack `make run` starts (scripts/run-local.sh on the shipped
bridges.conf: a local mosquitto, pusher-local and the daemon), then the shell blocks of README.md's
tour and of docs/guide/configure.md, run as a reader pastes them, each block's printed output (the
```text block after it) checked line by line. Also docs/pusher-local.md's commands, each against
the line the page says it prints.

Every block marked `<!-- commands: run by Tests/e2e/test_docs_tour.py -->` in those documents is run
here (scripts/check-docs.py requires the marker to name a test that names the document). Only the
addresses change, so that the test never meets a `make run` of the developer's: the stack runs on
free ports from a copy of bridges.conf, and the blocks are rewritten to match (`-h 127.0.0.1` gets
`-p PORT`, `127.0.0.1:9464` its port, `--config bridges.conf` and the installed path
/etc/pusher-mqtt-bridge/bridges.conf the copy, `.build/debug/` and an installed `pusher-mqtt-bridge`
the binaries under test). run-local.sh runs from a copy in the test's directory, so its `run/`
(broker persistence, logs) is the test's own."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path

from bridge_testkit.harness import TestCA, free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- commands: run by Tests/e2e/test_docs_tour.py -->"
# The documents whose marked blocks this test runs, in the order a reader meets them.
DOCUMENTS = ["README.md", "docs/guide/configure.md"]


def marked_blocks(document: str) -> list[tuple[str, str | None]]:
    """Each shell block after MARKER in `document`, with the ```text block that follows it before the
    next shell block (its expected output), or None."""
    lines = (REPO / document).read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != MARKER:
            i += 1
            continue
        assert lines[i + 1].startswith("```sh"), f"{document}:{i + 2}: the marker must precede a ```sh block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        commands = "\n".join(lines[i + 2:end])
        expected = None
        j = end + 1
        while j < len(lines) and not lines[j].startswith("```sh") and lines[j].strip() != MARKER:
            if lines[j].startswith("```text"):
                stop = next(k for k in range(j + 1, len(lines)) if lines[k].startswith("```"))
                expected = "\n".join(lines[j + 1:stop])
                break
            j += 1
        blocks.append((commands, expected))
        i = end + 1
    return blocks


def rewrite(commands: str, bin_dir: Path, config: Path, mqtt_port: int, metrics_port: int) -> str:
    commands = commands.replace(".build/debug/", f"{bin_dir}/")
    commands = re.sub(r"(?<![\w/.-])pusher-mqtt-bridge (?=check|route|tap|trigger)", f"{bin_dir}/pusher-mqtt-bridge ", commands)
    commands = commands.replace("/etc/pusher-mqtt-bridge/bridges.conf", str(config))
    commands = commands.replace("--config bridges.conf", f"--config {config}")
    commands = commands.replace("-h 127.0.0.1", f"-h 127.0.0.1 -p {mqtt_port}")
    return commands.replace("127.0.0.1:9464", f"127.0.0.1:{metrics_port}")


def run_block(commands: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs the block's lines one after another in one shell, two seconds apart (as a reader types
    them: a subscriber started with `&` is listening before the next line sends, also on a busy CI
    machine), then ends what was left running in the background. Fails at the first command that
    fails."""
    lines = [line for line in commands.splitlines() if line.strip()]
    script = "set -e\n" + "\nsleep 2\n".join(lines) + "\nsleep 2\nkill $(jobs -p) 2>/dev/null || true\nwait || true\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)


def printed(expected: str, output: str) -> list[str]:
    """The lines of `expected` missing from `output` (`…` stands for any text)."""
    missing = []
    for line in expected.splitlines():
        if not line.strip():
            continue
        pattern = ".*".join(re.escape(part) for part in line.strip().split("…"))
        if not re.search(pattern, output):
            missing.append(line)
    return missing


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_the_readme_tour_works_on_make_runs_stack(workdir):
    bin_dir = Path(os.environ["BRIDGE_BIN"]).resolve().parent
    assert (bin_dir / "pusher-local").exists(), f"run-local.sh needs pusher-local next to the daemon in {bin_dir}"
    mqtt_port, pusher_port, metrics_port = free_port(), free_port(), free_port()

    shipped = (REPO / "bridges.conf").read_text()
    for old, new in [("port = 1883", f"port = {mqtt_port}"), ("port = 6001", f"port = {pusher_port}"),
                     ("127.0.0.1:9464", f"127.0.0.1:{metrics_port}")]:
        assert old in shipped, f"bridges.conf no longer has {old!r}: update this test and the README's tour"
        shipped = shipped.replace(old, new)
    config = workdir / "bridges.conf"
    config.write_text(shipped)

    (workdir / "scripts").mkdir()
    shutil.copy(REPO / "scripts/run-local.sh", workdir / "scripts/run-local.sh")
    log = (workdir / "run-local.log").open("w")
    env = {**os.environ, "STATE_DIRECTORY": str(workdir / "state")}
    stack = subprocess.Popen(["bash", str(workdir / "scripts/run-local.sh"), str(bin_dir), str(config)],
                             cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_until(lambda: ready(metrics_port), timeout=30, what="make run's stack ready")
        ran = 0
        for document in DOCUMENTS:
            blocks = marked_blocks(document)
            assert blocks, f"{document} has no block marked for this test"
            for commands, expected in blocks:
                result = run_block(rewrite(commands, bin_dir, config, mqtt_port, metrics_port), workdir)
                output = result.stdout + result.stderr
                assert result.returncode == 0, f"{document}: this block failed ({result.returncode}):\n{commands}\n{output}"
                if expected is not None:
                    missing = printed(expected, output)
                    assert not missing, (f"{document}: the block\n{commands}\ndid not print\n" + "\n".join(missing)
                                         + f"\nIt printed:\n{output}")
                ran += 1
        assert ran >= 4
    finally:
        # Ctrl-C, as the README says: the script stops the daemon, then the servers it started.
        os.killpg(stack.pid, signal.SIGINT)
        try:
            stack.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)
            stack.wait()
        log.close()
        print((workdir / "run-local.log").read_text()[-4000:])


def first_line(process: subprocess.Popen, timeout: float = 15) -> str:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        return ""


def test_pusher_local_prints_what_its_page_says(workdir):
    """Each command of docs/pusher-local.md's block starts pusher-local; the comment line after it
    gives the line it prints ("…: pusher-local listening on …"). Run on a free port, with a
    certificate and key made for the TLS line."""
    bin_dir = Path(os.environ["PUSHER_LOCAL_BIN"]).resolve().parent
    [(commands, _)] = marked_blocks("docs/pusher-local.md")
    lines = commands.splitlines()
    pairs = [(lines[i], lines[i + 1]) for i in range(len(lines) - 1)
             if lines[i].startswith(".build/debug/pusher-local") and lines[i + 1].startswith("#")]
    assert len(pairs) == 2, f"docs/pusher-local.md's block changed: update this test\n{commands}"
    cert, key = TestCA(workdir / "pki").issue("server", dns=("localhost",), ips=("127.0.0.1",))
    (workdir / "server.pem").write_bytes(cert.read_bytes())
    (workdir / "server.key").write_bytes(key.read_bytes())
    for command, comment in pairs:
        port = free_port()
        argv = command.replace(".build/debug/", f"{bin_dir}/").replace("--port 6001", f"--port {port}").split()
        said = comment[comment.index("pusher-local listening"):].replace(":6001", f":{port}")
        process = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert first_line(process) == said, f"{command}: the page says it prints {said!r}"
        finally:
            process.terminate()
            process.wait(timeout=10)
