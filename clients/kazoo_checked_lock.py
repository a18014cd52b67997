"""lockcheck reference client: kazoo's `Lock` (Debian python3-kazoo), used carefully: before each
access to the resource it checks that its ZooKeeper session has stayed CONNECTED since it
acquired the lock, and if not it does not access (it releases what it can and says `lost`).

Run: lockcheck real --algorithm zk-sequential --faults partition \
       --client '/usr/bin/python3 clients/kazoo_checked_lock.py'

Why this is safe under a partition (lockcheck's proxies black-hole the cut link: nothing flows
either way, no RST, until the heal), and only for this reason:
- The server ends a session it has not heard from for the session timeout T (rounded up to its
  next tick, so never sooner than T); only then is the holder's ephemeral node deleted and the
  next client in the queue let in.
- kazoo (2.8, protocol/connection.py) negotiates T and sets read_timeout = 2T/3. When its
  socket has been silent for read_timeout/2 it pings; when it stays silent for read_timeout/2
  more with the ping unanswered, it drops the connection, and the client's state goes to
  SUSPENDED (a listener is called at once, from kazoo's connection thread). So a client cut
  off since it last heard from the server at t0 is SUSPENDED by t0 + 2T/3, while the server
  (which heard it at about t0 too) expires the session no sooner than t0 + T.
- This client counts every change of state away from CONNECTED. An access is sent only if that
  count has not moved since the acquisition: then the session was not suspended, so the server
  heard from it within the last 2T/3, and it cannot have expired the session (and let another
  holder in) for T/3 more: far longer than the moment between the check and the access line
  reaching lockcheck. A session that was suspended and then reconnected is refused all the same
  (it may or may not be the same session; the lock is given up).
Under `--faults pause` (SIGSTOP of the whole process past T) the check cannot be relied on: the
thread that would see the session drop is stopped too, so on waking the state still reads
CONNECTED until kazoo's connection thread has run. In the pause story the server closed the
expired session's connection during the pause, so on waking that thread reads the close and
marks the session SUSPENDED while the main thread checks: a race, UNSAFE in about half the runs
(real/tests/clients.rs pins the race-free variant, where the close reaches the client a second
after it woke: UNSAFE). A pause between the check and the write, Kleppmann's GC-pause story,
always defeats it. A write held by the network (a partition that delays rather than loses the
access itself) is not covered either: only a fencing token is.
"""

import logging
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.exceptions import LockTimeout  # noqa: E402

import lockcheck_client as lc  # noqa: E402

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
zk = KazooClient(hosts=",".join("%s:%s" % tuple(hp) for hp in lc.SERVERS), timeout=lc.TTL_S)

# When (time.monotonic()) the session left CONNECTED (SUSPENDED or LOST), each time: appended
# by kazoo's connection thread.
departures = []
departures_lock = threading.Lock()


def on_state(state):
    if state != KazooState.CONNECTED:
        with departures_lock:
            departures.append((time.monotonic(), state))
        sys.stderr.write("session %s\n" % state)
        sys.stderr.flush()


zk.add_listener(on_state)
zk.start(timeout=15)


def departed():
    with departures_lock:
        return list(departures)


class Held:
    """A kazoo Lock, with when it was acquired and how many departures there had been."""

    def __init__(self, lock):
        self.lock = lock
        self.at = time.monotonic()
        self.since = len(departed())

    def still_connected(self):
        return len(departed()) == self.since and zk.state == KazooState.CONNECTED


def acquire(wait_s):
    lock = zk.Lock("/" + lc.KEY, identifier=lc.CLIENT_ID)
    try:
        return Held(lock) if lock.acquire(timeout=wait_s) else None
    except LockTimeout:
        return None


def release(held):
    return "released" if held.lock.release() else "lost"


def give_up(held):
    """The session did not stay connected: release what can be released, say why."""
    try:
        held.lock.release()
    except Exception as e:  # the session may be gone with the node: nothing left to release
        sys.stderr.write("release after losing the session: %s: %s\n" % (type(e).__name__, e))
    gone = departed()[held.since:]
    if not gone:  # not CONNECTED, and the listener not called yet
        return "session left CONNECTED after the acquisition (%s now): not accessing" % zk.state
    at, state = gone[0]
    return ("session left CONNECTED after the acquisition (%s %.3f s after it): not accessing"
            % (state, at - held.at))


lc.serve(acquire, release, token=lambda held: held.lock.node,
         check=lambda held: held.still_connected(), give_up=give_up)
