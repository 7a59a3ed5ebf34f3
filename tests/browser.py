"""Headless Chromium for the HTML report tests, driven through the DevTools protocol over a pipe.

``chromium --remote-debugging-pipe`` reads protocol commands from file descriptor 3 and
writes replies and events to descriptor 4, each message one JSON text followed by a NUL byte
(the transport Puppeteer and Playwright use): no websocket, no extra package. :class:`Browser`
opens a page, records every console error, uncaught exception and failed load (``Log`` and
``Runtime`` domains), lists the page's images with their decoded sizes and screenshots any
rectangle of the page as PNG bytes.

Import with ``from browser import ...`` (``tests/conftest.py`` puts this folder on the path).
Find the binary with :func:`find_chromium` (``$SERVESIM_CHROMIUM``, else ``chromium`` and its
usual names on ``PATH``); the Debian package is ``chromium`` (``.ci/run`` installs it).
"""
from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path

#: Environment variable naming a Chromium / Chrome binary (overrides the search on PATH).
CHROMIUM_ENV = "SERVESIM_CHROMIUM"
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
          "chrome-headless-shell")
#: Seconds Chromium may stay silent while a reply or the page load is awaited (a loaded CI
#: machine is slow; this bounds a hang, it measures nothing).
TIMEOUT_S = 60.0


def find_chromium() -> str | None:
    """The Chromium binary to use, or None when there is none."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return env
    for name in _NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _above_4(fd: int) -> int:
    """``fd`` moved to a number above 4, so that moving the child's ends onto 3 and 4 cannot
    overwrite one of them."""
    if fd > 4:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5)
    os.close(fd)
    return high


class BrowserError(RuntimeError):
    """Chromium did not start, answered with an error or timed out."""


class Browser:
    """One headless Chromium with one page (a context manager).

    Parameters
    ----------
    binary : str
        Path of the Chromium binary.
    width, height : int
        Viewport in CSS pixels (device scale factor 1).
    """

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        self._profile = tempfile.mkdtemp(prefix="servesim-chromium-")
        to_child_r, self._to_child = (_above_4(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_above_4(fd) for fd in os.pipe())
        args = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--mute-audio", f"--user-data-dir={self._profile}", "about:blank"]
        # Chromium's own log goes to a file (a pipe nobody reads would fill and block it);
        # the protocol pipe becomes the child's fds 3 (in) and 4 (out)
        self._log = open(Path(self._profile) / "chromium.log", "wb")  # noqa: SIM115
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            self._pid = os.posix_spawnp(args[0], args, dict(os.environ), file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, self._log.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, self._log.fileno(), 2),
                (os.POSIX_SPAWN_DUP2, to_child_r, 3), (os.POSIX_SPAWN_DUP2, from_child_w, 4)])
        finally:
            for fd in (devnull, to_child_r, from_child_w):
                os.close(fd)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target,
                                  flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    # -------------------------------------------------------------------- protocol
    def _read_message(self) -> dict:
        """The next protocol message (waiting at most :data:`TIMEOUT_S` for each chunk)."""
        while b"\0" not in self._buf:
            if not select.select([self._from_child], [], [], TIMEOUT_S)[0]:
                raise BrowserError(f"Chromium sent nothing for {TIMEOUT_S:g} s")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                log = (Path(self._profile) / "chromium.log").read_text(errors="replace")
                raise BrowserError(f"Chromium exited: {log.strip().splitlines()[-1:] or '?'}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, *, session: bool = False, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        """The first event ``method`` of the page (waiting for it if it has not come yet)."""
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message())

    # -------------------------------------------------------------------- the page
    def open(self, path: str | Path) -> None:
        """Load a local file and wait for its ``load`` event (images decoded)."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=Path(path).resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen since :meth:`open`."""
        out = []
        for ev in self.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                  for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + str(p.get("exceptionDetails", {}).get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + str(p["entry"].get("text")))
        return out

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        r = self.call("Runtime.evaluate", session=True, expression=expression,
                      returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"evaluate: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def images(self) -> list[dict]:
        """Every ``<img>`` of the page: ``complete``, ``natural_width`` / ``natural_height``
        (decoded pixels; 0 when the image failed) and its box in page coordinates."""
        js = ("JSON.stringify(Array.from(document.images).map(i => {"
              "const r = i.getBoundingClientRect();"
              "return {complete: i.complete, natural_width: i.naturalWidth,"
              " natural_height: i.naturalHeight, x: r.left + window.scrollX,"
              " y: r.top + window.scrollY, width: r.width, height: r.height,"
              " alt: i.alt, src_scheme: i.src.split(':')[0]}; }))")
        return json.loads(self.evaluate(js))

    def screenshot(self, x: float, y: float, width: float, height: float) -> bytes:
        """PNG bytes of a rectangle of the page (CSS pixels, beyond the viewport too)."""
        r = self.call("Page.captureScreenshot", session=True, format="png",
                      captureBeyondViewport=True,
                      clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})
        return base64.b64decode(r["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        for _ in range(200):  # up to ~10 s for Browser.close to end the process
            if os.waitpid(self._pid, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.05)
        else:
            os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def non_background_fraction(png: bytes, background=(255, 255, 255), tolerance: int = 24) -> float:
    """Share of a PNG's pixels that differ from ``background`` by more than ``tolerance`` in
    any RGB channel (0 for a blank image)."""
    import numpy as np
    from PIL import Image
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    diff = np.abs(img - np.asarray(background, dtype=np.int16)).max(axis=2)
    return float((diff > tolerance).mean()) if diff.size else 0.0
