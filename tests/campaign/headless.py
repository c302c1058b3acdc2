"""A headless Chromium driven over the DevTools protocol, for tests that check a page in a
real browser (imported by name: pytest puts this folder on sys.path).

The protocol runs over a pipe (``--remote-debugging-pipe``: JSON messages ended by a NUL
byte, the browser reading fd 3 and writing fd 4), so there is no port, no websocket
library and nothing to install besides the browser (``tools/install_browser.sh``).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "tools/install_browser.sh (make test runs it)"


def find_chromium() -> Path | None:
    """$ONNXFUZZ_CHROMIUM, else the browser tools/install_browser.sh put in .browser/, else
    a Chromium on PATH (the distribution's package, which the script installs as root)."""
    env = os.environ.get("ONNXFUZZ_CHROMIUM")
    if env:
        path = Path(env)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    path = ROOT / ".browser" / "chromium" / "chromium"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


@dataclass
class Page:
    """What loading a page gave: its screenshot, what it reported, what it fetched."""

    png: bytes
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    values: dict[str, Any] = field(default_factory=dict)  # expression -> its value


class Chromium:
    def __init__(self, executable: Path, width: int, height: int, timeout: float = 60.0):
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="onnxfuzz-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser's ends above 9, so that moving them to 3 and 4 clobbers neither.
        to_browser_r, from_browser_w = (_above_9(fd) for fd in (to_browser_r, from_browser_w))
        folder = executable.parent
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(folder / "lib"), env.get("LD_LIBRARY_PATH", "")) if p
        )
        if (folder / "fonts.conf").exists():
            env["FONTCONFIG_FILE"] = str(folder / "fonts.conf")
        args = [
            str(executable),
            "--headless=new",
            "--no-sandbox",  # containers and CI users without user namespaces
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]
        # The browser wants the pipe on fds 3 and 4: bash moves them there, then runs it
        # (dash takes no fd above 9 in a redirection).
        script = f'exec 3<&{to_browser_r} 4>&{from_browser_w}; exec "$@"'
        self.proc = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c", script, "bash", *args],
            pass_fds=(to_browser_r, from_browser_w),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    # --- the protocol -----------------------------------------------------------------
    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError(f"the browser exited (code {self.proc.poll()})")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for e in self.events:
            if e.get("method") == event:
                return e
        while True:
            e = self._receive(deadline)
            self.events.append(e)
            if e.get("method") == event:
                return e

    # --- a page -----------------------------------------------------------------------
    def load(self, url: str, expressions: list[str]) -> Page:
        """Open ``url``, wait for its load event, evaluate ``expressions`` and take a
        screenshot of the viewport."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired")
        values = {}
        for expr in expressions:
            r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
            values[expr] = r.get("result", {}).get("value")
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session)
        png = base64.b64decode(shot["data"])
        return Page(png, _errors(self.events), _requests(self.events), values)

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError, ConnectionError):
            self.call("Browser.close")  # a browser that died already is closed
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _above_9(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a)) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description')}")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return out


def _requests(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
    ]
