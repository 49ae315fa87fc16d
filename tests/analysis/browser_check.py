#!/usr/bin/env python3
"""browser_check.py: opens a rendered report in headless Chromium (Debian `chromium`) and checks what a reader sees.

    browser_check.py REPORT_DIR [--chromium PATH] [--timeout S]

Drives Chromium over the DevTools protocol (a WebSocket; the small client below uses only the standard library) and
fails (exit 1, one line per problem) unless:
  - index.html loads, with no console error, no uncaught exception and no failed request;
  - every chart (<figure class="chart">: its linked <img class="chart-svg">, or an inline <svg>) has a drawn size and
    its SVG loads as an image, and every PNG a figure links to loads as an image with a non-zero size;
  - every <table> has at least one row of data (a <td>);
  - the table of contents points at sections that exist.
It writes REPORT_DIR/screenshot.png (the whole page, or its first 4000 pixels where Chromium cannot capture it all)
and prints one summary line. Exit 77 (ctest's skip) when
Chromium is not installed, naming the package.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SKIP = 77


class DevTools:
    """One WebSocket connection to a page target: send commands, collect events."""

    def __init__(self, ws_url, timeout):
        rest = ws_url.split("://", 1)[1]
        hostport, path = rest.split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("DevTools closed the connection during the handshake")
            response += chunk
        if b" 101 " not in response.split(b"\r\n", 1)[0]:
            raise RuntimeError("DevTools refused the WebSocket: " + response.split(b"\r\n", 1)[0].decode())
        self.buffer = response.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0
        self.events = []

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self):
        """One whole message (continuation frames joined); control frames are answered or skipped."""
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, length = b0 & 0x0F, b1 & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)
            if opcode == 0x9:  # ping
                self._send(payload, opcode=0xA)
                continue
            if opcode in (0x8, 0xA):
                if opcode == 0x8:
                    raise RuntimeError("DevTools closed the WebSocket")
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def _send(self, data, opcode=0x1):
        mask = os.urandom(4)
        header = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def call(self, method, **params):
        self.next_id += 1
        wanted = self.next_id
        self._send(json.dumps({"id": wanted, "method": method, "params": params}).encode())
        while True:
            message = json.loads(self._frame())
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(e["method"] == event for e in self.events):
                return True
            self.events.append(json.loads(self._frame()))
        return False

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError("page script failed: " + json.dumps(result["exceptionDetails"])[:400])
        return result["result"].get("value")


# Runs in the page: what a reader would see, as one JSON value.
PAGE_CHECKS = r"""
(async () => {
  const out = {charts: 0, empty_charts: [], broken_charts: [], pngs: 0, broken_pngs: [], tables: 0, empty_tables: [],
               toc: 0, broken_toc: []};
  const linked = [];  // charts linked as <img class="chart-svg" loading="lazy">: load them all now, as a reader would
  for (const fig of document.querySelectorAll('figure.chart')) {
    const chart = fig.querySelector('img.chart-svg') || fig.querySelector('svg');
    if (!chart) continue;
    out.charts++;
    if (chart.tagName === 'IMG') {
      chart.loading = 'eager';
      linked.push(new Promise(done => {
        const fail = () => { out.broken_charts.push(fig.id + ' ' + chart.getAttribute('src')); done(); };
        if (chart.complete) { if (chart.naturalWidth > 0) done(); else fail(); return; }
        chart.addEventListener('load', () => { if (chart.naturalWidth > 0) done(); else fail(); });
        chart.addEventListener('error', fail);
      }));
    }
    const box = chart.getBoundingClientRect();
    if (!(box.width > 50 && box.height > 50)) out.empty_charts.push(fig.id + ' ' + box.width + 'x' + box.height);
  }
  await Promise.all(linked);
  const pngs = [...document.querySelectorAll('a[href$=".png"]')].map(a => a.href);
  out.pngs = pngs.length;
  await Promise.all(pngs.map(src => new Promise(done => {
    const img = new Image();
    img.onload = () => { if (!(img.naturalWidth > 0)) out.broken_pngs.push(src); done(); };
    img.onerror = () => { out.broken_pngs.push(src); done(); };
    img.src = src;
  })));
  document.querySelectorAll('table').forEach((t, i) => {
    out.tables++;
    if (!t.querySelector('td')) {
      const section = t.closest('section');
      out.empty_tables.push('table ' + i + (section && section.id ? ' in #' + section.id : ''));
    }
  });
  for (const a of document.querySelectorAll('nav.toc a')) {
    out.toc++;
    const id = decodeURIComponent(a.getAttribute('href').slice(1));
    if (!document.getElementById(id)) out.broken_toc.push(a.getAttribute('href'));
  }
  return out;
})()
"""


def find_chromium(given):
    for name in ([given] if given else []) + ["chromium", "chromium-browser", "google-chrome"]:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    index = args.report_dir.resolve() / "index.html"
    if not index.is_file():
        print(f"browser_check: {index} does not exist", file=sys.stderr)
        return 2
    chromium = find_chromium(args.chromium)
    if not chromium:
        print("browser_check: skipped: no Chromium on PATH (Debian package `chromium`; make setup installs it)")
        return SKIP

    port = free_port()
    profile = tempfile.mkdtemp(prefix="dtlab-chromium-")
    browser = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--allow-file-access-from-files", f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
         "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    problems = []
    try:
        deadline = time.time() + args.timeout
        targets = None
        while time.time() < deadline:
            if browser.poll() is not None:
                raise RuntimeError("Chromium exited: " + browser.stderr.read().decode(errors="replace")[-600:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    targets = [t for t in json.load(r) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if not targets:
            raise RuntimeError(f"Chromium's DevTools did not answer on port {port} within {args.timeout:.0f} s")
        tools = DevTools(targets[0]["webSocketDebuggerUrl"], args.timeout)
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.call(f"{domain}.enable")
        tools.call("Page.navigate", url=index.as_uri())
        if not tools.wait_for("Page.loadEventFired", args.timeout):
            problems.append(f"{index}: no load event within {args.timeout:.0f} s")
        seen = tools.evaluate(PAGE_CHECKS)
        for e in tools.events:
            method, p = e["method"], e.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                problems.append("console error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                             for a in p.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                problems.append("uncaught exception: " + p["exceptionDetails"].get("text", "")
                                + " " + str(p["exceptionDetails"].get("exception", {}).get("description", "")))
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                problems.append(f"console error ({p['entry'].get('source')}): {p['entry'].get('text')} "
                                f"{p['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                problems.append(f"request failed: {p.get('errorText')} ({p.get('type')})")
        if seen["charts"] == 0:
            problems.append("no chart on the page")
        problems += [f"chart drawn without a size: {c}" for c in seen["empty_charts"]]
        problems += [f"chart's SVG does not load as an image: {c}" for c in seen["broken_charts"]]
        if seen["pngs"] == 0:
            problems.append("no PNG linked from the page")
        problems += [f"PNG does not load as an image: {p}" for p in seen["broken_pngs"]]
        if seen["tables"] == 0:
            problems.append("no table on the page")
        problems += [f"table without a row of data: {t}" for t in seen["empty_tables"]]
        problems += [f"table of contents points nowhere: {t}" for t in seen["broken_toc"]]
        try:
            shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        except RuntimeError as e:  # a full report is taller than Chromium captures at once: its first screens
            if "too large" not in str(e):
                raise
            tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=4000, deviceScaleFactor=1, mobile=False)
            shot = tools.call("Page.captureScreenshot", format="png")
        screenshot = args.report_dir / "screenshot.png"
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        print(f"browser_check: {index}: {seen['charts']} charts, {seen['pngs']} PNGs, {seen['tables']} tables, "
              f"{seen['toc']} contents links; {len(problems)} problem(s); screenshot {screenshot} "
              f"({screenshot.stat().st_size} bytes)")
    except (RuntimeError, OSError) as e:
        problems.append(f"browser: {e}")
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)
    for p in problems:
        print("browser_check: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
