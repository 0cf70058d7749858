#!/usr/bin/env python3
"""Opens URL in headless CHROMIUM and watches the live map through the DevTools protocol
(--remote-debugging-pipe: JSON messages separated by NUL on fds 3 and 4, no WebSocket needed).

The page runs in real time with its real EventSource. Prints one JSON line per look at the page
(the status text, each device's data-* attributes, and the "d" of every device marker path) as
soon as DEVICES devices are shown, then keeps looking until a marker was redrawn elsewhere, prints
that look too, and exits 0; exits 1 with the last look when TIMEOUT seconds pass first."""
import json
import os
import subprocess
import sys
import time

chromium, url, devices, timeout, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()


def child_fds():
    # Copies first: a pipe end may itself be fd 3 or 4, and dup2 onto itself keeps close-on-exec.
    reading, writing = os.dup(to_chrome_r), os.dup(from_chrome_w)
    os.dup2(reading, 3)
    os.dup2(writing, 4)


browser = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
     "--user-data-dir=" + profile, "--window-size=1000,700",
     # Anything off this machine would fail: the page must need nothing from outside.
     "--proxy-server=127.0.0.1:9", "--remote-debugging-pipe", "about:blank"],
    preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.close(to_chrome_r)
os.close(from_chrome_w)
buffered = b""
next_id = 0


def call(method, params=None, session=None):
    global buffered, next_id
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    os.write(to_chrome_w, json.dumps(message).encode() + b"\0")
    while True:
        while b"\0" not in buffered:
            chunk = os.read(from_chrome_r, 65536)
            if not chunk:
                raise SystemExit("chromium closed the pipe")
            buffered += chunk
        raw, buffered = buffered.split(b"\0", 1)
        reply = json.loads(raw)
        if reply.get("id") == next_id:
            if "error" in reply:
                raise SystemExit("%s: %s" % (method, reply["error"]))
            return reply["result"]


LOOK = """JSON.stringify({
  status: (document.querySelector('.locgate-live-status') || {}).textContent || '',
  devices: Array.from(document.querySelectorAll('.locgate-live-device')).map(function (e) {
    return { device: e.dataset.device, lat: e.dataset.lat, lon: e.dataset.lon, moves: e.dataset.moves };
  }),
  markers: Array.from(document.querySelectorAll('path.locgate-device')).map(function (p) { return p.getAttribute('d'); }),
  fences: document.querySelectorAll('path.locgate-fence').length,
  components: Array.from(document.querySelectorAll('.locgate-live-components tr[data-component]')).map(function (r) { return r.dataset.component; })
})"""

code = 1
try:
    target = call("Target.createTarget", {"url": url})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    deadline = time.monotonic() + timeout
    first = None
    look = None
    while time.monotonic() < deadline:
        look = json.loads(call("Runtime.evaluate", {"expression": LOOK, "returnByValue": True}, session)["result"].get("value", "{}"))
        if first is None and len(look.get("markers", [])) >= devices and len(look.get("devices", [])) >= devices:
            first = look
            print(json.dumps(first), flush=True)
        elif first is not None and look["markers"] != first["markers"]:
            print(json.dumps(look), flush=True)
            code = 0
            break
        time.sleep(0.2)
    if code != 0:
        print(json.dumps(look), flush=True)
finally:
    browser.kill()
    browser.wait()
sys.exit(code)
