"""A real Home Assistant for the discovery test: `hass` from .venv-ha (scripts/setup-homeassistant.sh)
on a generated config directory, reached through its REST API with a token got the way a person's
browser gets one (a user made with Home Assistant's own `auth` script, its login flow, `/auth/token`),
its MQTT integration added through its config flow and pointed at the test's mosquitto."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from bridge_testkit.harness import Process, free_port, wait_until

USER, PASSWORD = "bridge-test", "bridge-test-password"

CONFIGURATION = """
homeassistant:
  name: pusher-mqtt-bridge test
  latitude: 0
  longitude: 0
  elevation: 0
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: DE
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
auth:
config:
logger:
  default: warning
  logs:
    homeassistant.components.mqtt: info
"""


def hass_bin() -> str:
    path = os.environ.get("HASS_BIN") or str(Path(__file__).resolve().parents[2] / ".venv-ha" / "bin" / "hass")
    if not os.path.exists(path):
        raise RuntimeError(f"Home Assistant is not installed: {path} (run scripts/setup-homeassistant.sh)")
    return path


class HomeAssistant(Process):
    """`hass -c DIR --skip-pip` on a free loopback port."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.config_dir = workdir / "homeassistant"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        (self.config_dir / "configuration.yaml").write_text(CONFIGURATION.format(port=self.port))
        self.token = ""
        super().__init__("homeassistant", [hass_bin(), "-c", str(self.config_dir), "--skip-pip"], workdir)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, stdout=None):
        # The user, with Home Assistant's own script, before it starts (it reads the auth store at start).
        subprocess.run([hass_bin(), "--script", "auth", "-c", str(self.config_dir), "add", USER, PASSWORD],
                       check=True, capture_output=True, timeout=120)
        super().start(stdout)
        # Recovery mode (an integration it always loads could not be set up) is a failed start too.
        wait_until(lambda: self._answers() or not self.running() or self._recovering(), 180, 0.5,
                   "Home Assistant's HTTP API")
        if not self.running() or self._recovering():
            raise RuntimeError("Home Assistant did not start:\n" + self._errors())
        self.token = self._login()
        return self

    def home_assistant_log(self) -> str:
        try:
            return (self.config_dir / "home-assistant.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _recovering(self) -> bool:
        return "Activating recovery mode" in self.home_assistant_log()

    def _errors(self) -> str:
        lines = [line for line in self.home_assistant_log().splitlines() if " ERROR " in line]
        return "\n".join(lines[:20]) + "\n" + self.log()[-2000:]

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.url}/api/", timeout=2)
            return True
        except urllib.error.HTTPError as error:
            return error.code == 401  # up, and asking for a token
        except OSError:
            return False

    def request(self, method: str, path: str, body=None, *, form: dict | None = None, auth: bool = True):
        """(status, parsed JSON or text) of one request to the API."""
        headers = {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def _login(self) -> str:
        """An access token through the login flow, as the frontend gets one."""
        client = f"{self.url}/"
        status, flow = self.request("POST", "/auth/login_flow", {
            "client_id": client, "handler": ["homeassistant", None], "redirect_uri": client}, auth=False)
        assert status == 200, (status, flow)
        status, result = self.request("POST", f"/auth/login_flow/{flow['flow_id']}", {
            "client_id": client, "username": USER, "password": PASSWORD}, auth=False)
        assert status == 200 and result.get("type") == "create_entry", (status, result)
        status, tokens = self.request("POST", "/auth/token", form={
            "grant_type": "authorization_code", "code": result["result"], "client_id": client}, auth=False)
        assert status == 200, (status, tokens)
        return tokens["access_token"]

    def add_mqtt(self, broker_port: int):
        """The MQTT integration through its config flow: the broker on 127.0.0.1, discovery and the
        birth message (`homeassistant/status` = `online`) at their defaults."""
        status, flow = self.request("POST", "/api/config/config_entries/flow", {"handler": "mqtt"})
        assert status == 200, (status, flow)
        while flow.get("type") == "form":
            step = flow["step_id"]
            answer = {"broker": "127.0.0.1", "port": broker_port} if step == "broker" else {}
            status, flow = self.request("POST", f"/api/config/config_entries/flow/{flow['flow_id']}", answer)
            assert status == 200, (status, flow)
        assert flow.get("type") == "create_entry", flow

    def state(self, entity_id: str) -> dict | None:
        """The entity's state object, or None when Home Assistant has no such entity."""
        status, body = self.request("GET", f"/api/states/{entity_id}")
        if status == 404:
            return None
        assert status == 200, (status, body)
        return body

    def template(self, text: str) -> str:
        status, body = self.request("POST", "/api/template", {"template": text})
        assert status == 200, (status, body)
        return body if isinstance(body, str) else json.dumps(body)

    def wait_state(self, entity_id: str, expected, timeout: float = 30) -> dict | None:
        """Waits until the entity's state is `expected` (None: until the entity is gone)."""
        def matches():
            state = self.state(entity_id)
            if expected is None:
                return state is None or None
            return state if state and state["state"] == expected else None
        try:
            return wait_until(matches, timeout, 0.25, f"{entity_id} to be {expected}")
        except AssertionError:
            raise AssertionError(f"{entity_id}: {self.state(entity_id)} after {timeout} s, expected {expected}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        # Home Assistant writes its stores on the way out: give it longer than a daemon.
        return super().stop(sig, timeout)
