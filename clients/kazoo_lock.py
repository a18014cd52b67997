"""lockcheck reference client: kazoo's `Lock` (Debian python3-kazoo), ZooKeeper's sequential
ephemeral-node recipe, with the session timeout lockcheck gives.

Run: lockcheck real --algorithm zk-sequential --faults pause \
       --client '/usr/bin/python3 clients/kazoo_lock.py'
"""

import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import LockTimeout  # noqa: E402

import lockcheck_client as lc  # noqa: E402

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
zk = KazooClient(hosts=",".join("%s:%s" % tuple(hp) for hp in lc.SERVERS), timeout=lc.TTL_S)
zk.start(timeout=15)


def acquire(wait_s):
    lock = zk.Lock("/" + lc.KEY, identifier=lc.CLIENT_ID)
    try:
        return lock if lock.acquire(timeout=wait_s) else None
    except LockTimeout:
        return None


def release(lock):
    return "released" if lock.release() else "lost"


lc.serve(acquire, release, token=lambda lock: lock.node)
