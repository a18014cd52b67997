"""The client side of lockcheck's client protocol, version 1 (docs/check-your-lock.md),
for the Python reference clients: JSON lines on stdin/stdout, the critical section done as
lockcheck's own clients do it (enter, work hold_ms, exit, release).

A reference client gives `serve` two functions over its library: `acquire(wait_s)`, which returns
a held lock object or None (gave up), and `release(lock)`, which returns "released" or "lost".
An exception from either is reported as an `error` line, never hidden. A careful client also
gives `check(lock)`, asked right before each access: when it says False the client does not
access, calls `give_up(lock)` (which returns why) and ends the section with `lost`.
"""

import json
import os
import sys
import time

# What lockcheck tells every client (docs/check-your-lock.md lists them).
CLIENT_ID = os.environ["LOCKCHECK_CLIENT_ID"]
SERVERS = [s.rsplit(":", 1) for s in os.environ["LOCKCHECK_SERVERS"].split(",")]
KEY = os.environ["LOCKCHECK_KEY"]
TTL_S = int(os.environ["LOCKCHECK_TTL_MS"]) / 1000.0

if os.environ.get("LOCKCHECK_PROTOCOL") != "1":
    sys.exit("this client speaks lockcheck's protocol version 1, lockcheck speaks %s"
             % os.environ.get("LOCKCHECK_PROTOCOL"))


def say(**message):
    message["v"] = 1
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def hear():
    line = sys.stdin.readline()
    if not line:  # lockcheck is gone
        sys.exit(0)
    return json.loads(line)


def access(phase):
    """Asks lockcheck to touch the resource; True when it accepted the access."""
    say(op="access", phase=phase)
    return hear().get("accepted") is True


def serve(acquire, release, token=lambda lock: None, check=None, give_up=None):
    say(op="ready")
    while True:
        command = hear()
        if command["op"] == "stop":
            return
        try:
            lock = acquire(command["wait_ms"] / 1000.0)
        except Exception as e:  # the library failed: said, not hidden
            say(op="error", reason="%s: %s" % (type(e).__name__, e))
            continue
        if lock is None:
            say(op="not_acquired")
            continue
        said = {"op": "acquired"}
        if token(lock) is not None:
            said["token"] = token(lock)
        say(**said)
        lost = None
        if not command.get("probe"):
            if check is not None and not check(lock):
                lost = give_up(lock)
            elif access("enter"):
                time.sleep(command["hold_ms"] / 1000.0)
                if check is not None and not check(lock):
                    lost = give_up(lock)
                else:
                    access("exit")
        if lost is not None:
            say(op="lost", reason=lost)
            continue
        try:
            say(op=release(lock))
        except Exception as e:
            say(op="error", reason="%s: %s" % (type(e).__name__, e))
