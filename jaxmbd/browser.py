"""A page in a headless Chromium, driven over the DevTools protocol: how :meth:`jaxmbd.view.View.screenshot`
renders a view to a PNG, and how the tests look at the viewer as a user does.

Chromium is found as ``$JAXMBD_CHROMIUM``, else ``chromium``, ``chromium-browser``,
``google-chrome`` or ``google-chrome-stable`` on the PATH (Debian: ``apt-get install chromium``).
It runs with WebGL in software (SwiftShader), without a sandbox (as root in containers), with
its network features off, in a new profile that is deleted afterwards."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
         "--disable-quic", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
         "--hide-scrollbars")


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or the page did not do what was asked."""


def find_chromium():
    """The Chromium executable, or None."""
    env = os.environ.get("JAXMBD_CHROMIUM")
    if env:
        return env if os.path.isfile(env) else shutil.which(env)
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    """A file opened in a headless Chromium (a context manager).  ``evaluate(js)`` runs an
    expression in the page and returns its value; ``screenshot()`` returns PNG bytes; ``seek(t, t0,
    t1)`` pauses a viser recording's playback and moves its time slider to ``t``."""

    def __init__(self, path, width=960, height=600, browser=None, timeout=120.0, offline=True):
        exe = browser or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found: install it (Debian: apt-get install chromium) or set "
                               "JAXMBD_CHROMIUM to its path")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="jaxmbd-chromium-")
        args = [exe, *FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
                f"--window-size={width},{height}", "about:blank"]
        if offline:   # no network at all: the page must be self-contained
            args.insert(-1, "--proxy-server=127.0.0.1:9")
            args.insert(-1, "--proxy-bypass-list=<-loopback>")
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        self.console = []
        try:
            self._connect()
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
            self.call("Page.navigate", url="file://" + os.path.abspath(path))
            self.wait_for("document.readyState === 'complete'")
        except BaseException:
            self.close()
            raise

    def _connect(self):
        from websockets.sync.client import connect
        port_file = os.path.join(self._profile, "DevToolsActivePort")
        deadline = time.monotonic() + self.timeout
        while not os.path.exists(port_file):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise BrowserError("Chromium did not start")
            time.sleep(0.05)
        port = None
        while port is None:
            with open(port_file) as f:
                line = f.readline().strip()
            port = int(line) if line.isdigit() else None
            if port is None:
                time.sleep(0.05)
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        self._ws = connect(url, max_size=None, open_timeout=10)

    def call(self, method, **params):
        """One DevTools command; returns its result."""
        i = next(self._ids)
        self._ws.send(json.dumps({"id": i, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            msg = json.loads(self._ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if msg.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                             for a in msg["params"].get("args", [])))
            if msg.get("id") == i:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (awaited if a promise)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:80]}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=None):
        """Wait until a JavaScript expression is true."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression[:80]}")
            time.sleep(0.1)

    def click(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=float(x), y=float(y), button="left", clickCount=1)

    def screenshot(self, tries=60, settle=0.5) -> bytes:
        """The page as PNG bytes, once it has stopped changing: captures taken after two animation
        frames each stay equal for ``settle`` seconds (a viser page fades its scene in after loading
        and applies a seek over several frames, later on a loaded machine)."""
        last, since = None, None
        self.dismiss_notifications()
        for _ in range(tries):
            self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
            now = time.monotonic()
            if png != last:
                last, since = png, now
            elif now - since >= settle:
                return png
            time.sleep(0.1)
        raise BrowserError(f"the page kept changing over {tries} screenshots")

    def seek(self, t, t0, t1):
        """Pause a viser recording (recorded from ``t0`` to ``t1``) and click its time slider where
        ``t`` is; returns the time the slider then shows."""
        self.wait_for("document.querySelector('canvas') !== null && "
                      "document.querySelector('[role=slider]') !== null")
        self.dismiss_notifications()
        button = self.evaluate(_PLAY_BUTTON)
        if button is None:
            raise BrowserError("the page has no playback bar")
        if "pause" in button[2]:
            self.click(button[0], button[1])
        x0, y, w = self.evaluate(_SLIDER_TRACK)
        frac = 0.0 if t1 <= t0 else min(max((t - t0) / (t1 - t0), 0.0), 1.0)
        self.click(x0 + frac * w, y)
        time.sleep(0.2)
        return float(self.evaluate("document.querySelector('[role=slider]').getAttribute('aria-valuenow')"))

    def dismiss_notifications(self):
        """Hide the page's notifications, now and later (viser's note that WebGL runs in software
        appears a moment after loading)."""
        self.evaluate("""(() => { if (!document.getElementById('jaxmbd-quiet')) {
          const s = document.createElement('style'); s.id = 'jaxmbd-quiet';
          s.textContent = '.mantine-Notifications-root, .mantine-Notification-root { display: none !important; }';
          document.head.appendChild(s); } return true; })()""")

    def close(self):
        try:
            if getattr(self, "_ws", None) is not None:
                self._ws.close()
        finally:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# the playback bar: its slider track (x of the left end, y of the middle, width, in CSS pixels) and
# its play/pause button (centre, and the icon's class: "...player-pause..." while playing)
_SLIDER_TRACK = """(() => { const tr = document.querySelector('[role=slider]').parentElement.getBoundingClientRect();
  return [tr.left, tr.top + tr.height / 2, tr.width]; })()"""
_PLAY_BUTTON = """(() => { const r = document.querySelector('.mantine-NumberInput-input').getBoundingClientRect();
  const b = Array.from(document.querySelectorAll('button.mantine-ActionIcon-root')).filter(e => {
    const q = e.getBoundingClientRect(); return q.right <= r.left && Math.abs(q.top - r.top) < 20; })[0];
  if (!b) return null; const q = b.getBoundingClientRect(); const svg = b.querySelector('svg');
  return [q.left + q.width / 2, q.top + q.height / 2, svg ? svg.getAttribute('class') : '']; })()"""
_CLOSE_BUTTONS = """Array.from(document.querySelectorAll('.mantine-Notification-closeButton')).map(b => {
  const q = b.getBoundingClientRect(); return [q.left + q.width / 2, q.top + q.height / 2]; })"""
