"""lockcheck reference client: redis-py's `Lock` (Debian python3-redis), as its documentation
uses it: `Redis.lock(name, timeout=TTL, blocking_timeout=wait)`, then `release()`.

Run: lockcheck real --algorithm single-redis --faults pause \
       --client '/usr/bin/python3 clients/redis_py_lock.py'
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from redis.exceptions import LockNotOwnedError  # noqa: E402

import lockcheck_client as lc  # noqa: E402

host, port = lc.SERVERS[0]
server = redis.Redis(host=host, port=int(port), socket_timeout=5)
server.ping()


def acquire(wait_s):
    lock = server.lock(lc.KEY, timeout=lc.TTL_S, sleep=0.05, blocking_timeout=wait_s)
    return lock if lock.acquire() else None


def release(lock):
    try:
        lock.release()
        return "released"
    except LockNotOwnedError:  # its key expired, or another client's is there now
        return "lost"


lc.serve(acquire, release, token=lambda lock: lock.local.token.decode())
