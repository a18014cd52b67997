// lockcheck reference client: node-redlock (the `redlock` package, 4.2.0, the npm registry's
// `latest`) over node_redis (`redis` 3.1.2), one client per master, as redlock's README uses them:
// `redlock.lock(resource, ttl)`, then `lock.unlock()`. It speaks lockcheck's client protocol v1
// (docs/check-your-lock.md): JSON lines on stdin/stdout.
//
// Run (after `npm ci` in this directory, which .ci/run does):
//   lockcheck real --algorithm redlock --faults pause \
//     --client 'node clients/node-redlock/redlock_client.js'
//
// What node-redlock 4.2.0 does (node_modules/redlock/redlock.js), next to lockcheck's `redlock`:
// - One attempt: the lock script (EXISTS, then SET key value PX ttl) on every master in parallel,
//   a random 16-byte value; held if a majority answered 1 AND `start + ttl - drift > Date.now()`,
//   where `start` is `Date.now()` before the requests and `drift = round(0.01 × ttl) + 2` ms.
//   lockcheck's rendition computes the same validity on a monotonic clock; node-redlock reads the
//   wall clock, so a jump of the client's clock moves its validity.
// - It waits for every master's answer (no per-request timeout of its own: a master that never
//   answers stalls the attempt for as long as the Redis client waits); the rendition bounds each
//   request.
// - A failed attempt unlocks everywhere and retries after 200 ± 100 ms, at most retryCount
//   (default 10) times; this client sets retryCount from the wait lockcheck gives.
// - `lock.expiration` is all the validity it reports: nothing checks it before the holder's
//   writes, and 4.x has no automatic extension (no watchdog). This client does what redlock's
//   README does: lock, work, unlock. `unlock` fails (LockError) unless a majority deleted the
//   key with this value: said here as `lost`.

'use strict';

const readline = require('readline');
const redis = require('redis');
const Redlock = require('redlock');

const env = process.env;
if (env.LOCKCHECK_PROTOCOL !== '1') {
  process.stderr.write(`this client speaks lockcheck's protocol version 1, lockcheck speaks ${env.LOCKCHECK_PROTOCOL}\n`);
  process.exit(2);
}
const KEY = env.LOCKCHECK_KEY;
const TTL_MS = Number(env.LOCKCHECK_TTL_MS);
const RETRY_DELAY_MS = 200; // redlock's default

const clients = env.LOCKCHECK_SERVERS.split(',').map((address) => {
  const i = address.lastIndexOf(':');
  const client = redis.createClient(Number(address.slice(i + 1)), address.slice(0, i));
  client.on('error', (e) => process.stderr.write(`redis ${address}: ${e.message}\n`));
  return client;
});
const redlock = new Redlock(clients, { retryDelay: RETRY_DELAY_MS });
redlock.on('clientError', (e) => process.stderr.write(`redlock: ${e.message}\n`));

function say(message) {
  process.stdout.write(JSON.stringify({ v: 1, ...message }) + '\n');
}

// stdin, one line at a time.
const lines = [];
const waiting = [];
const input = readline.createInterface({ input: process.stdin });
input.on('line', (line) => (waiting.length ? waiting.shift()(line) : lines.push(line)));
input.on('close', () => process.exit(0)); // lockcheck is gone, or said stop and closed
function hear() {
  return new Promise((resolve) => (lines.length ? resolve(lines.shift()) : waiting.push(resolve)))
    .then((line) => JSON.parse(line));
}

async function access(phase) {
  say({ op: 'access', phase });
  return (await hear()).accepted === true;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function section(command) {
  let lock;
  try {
    const retryCount = Math.max(1, Math.floor(command.wait_ms / RETRY_DELAY_MS));
    lock = await redlock.lockWithOptions(KEY, TTL_MS, { retryCount });
  } catch (e) {
    if (e instanceof Redlock.LockError) {
      say({ op: 'not_acquired', reason: e.message });
    } else {
      say({ op: 'error', reason: `${e.name}: ${e.message}` });
    }
    return;
  }
  say({ op: 'acquired', token: lock.value, valid_ms: Math.max(0, lock.expiration - Date.now()) });
  if (!command.probe && (await access('enter'))) {
    await sleep(command.hold_ms);
    await access('exit');
  }
  try {
    await lock.unlock();
    say({ op: 'released' });
  } catch (e) {
    if (e instanceof Redlock.LockError) {
      say({ op: 'lost', reason: e.message });
    } else {
      say({ op: 'error', reason: `${e.name}: ${e.message}` });
    }
  }
}

async function main() {
  // Connected to every master (node_redis queues commands until then; `ready` waits for it).
  await Promise.all(clients.map((c) => new Promise((resolve) => (c.ready ? resolve() : c.once('ready', resolve)))));
  say({ op: 'ready' });
  for (;;) {
    const command = await hear();
    if (command.op === 'stop') break;
    await section(command);
  }
  clients.forEach((c) => c.quit());
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
