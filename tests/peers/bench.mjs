// bench.mjs: the peers of obx.h on the workloads of `make bench` (tests/bench.c),
// one measurement per call, so that tests/peers/bench_peers.sh can interleave
// them with the library's rows on one PostgreSQL cluster.
//
//   node bench.mjs <graphile|pgboss|outbox> <enq1|enqb|drain1|drain2|latency> N
//   (PEERS_PG: host:port:database:user of the cluster; PEERS_TIMEOUT: seconds
//   a drain may take, default 900; PEERS_LATENCY_N: latency samples, 200)
//
// Prints one line: "RESULT <peer> <workload> <msgs/s>", or for latency
// "RESULT <peer> latency <p50 ms> <p99 ms>".
//
// The workloads, as tests/bench.c defines them:
//   enq1     N/4 messages, each in its own transaction
//   enqb     N messages, 100 per transaction
//   drain1   N ready messages (statistics taken filled), 1 worker process
//   drain2   the same, 2 worker processes started together
//   latency  200 messages, 3 ms apart, producer and worker in one process;
//            the time from before the enqueue to the handler, p50/p99
// Payload: a 200-character JSON document, as the library's rows carry.
//
// Each peer through its documented API, its defaults unless said here:
//
// graphile-worker: enqueue addJob() / addJobs() of makeWorkerUtils(); worker
//   run() with a taskList, in the configuration its performance page
//   recommends for throughput: concurrency 10, localQueue of 100 (it locks
//   and fetches 100 jobs per round trip, as the library claims 100), and
//   completeJobBatchDelay 0 (completions of one tick in one statement).
//   pollInterval stays 2000 ms: new jobs wake it through LISTEN/NOTIFY.
// pg-boss: enqueue send() / insert() (its batch call, one statement per 100);
//   worker work() with batchSize 100 and pollingIntervalSeconds 0.5 (the
//   least it allows). Its worker waits the interval after every fetch unless
//   notified, so the handler calls notifyWorker() after a full batch (a busy
//   queue then drains back to back) and the latency producer calls it after
//   send(), as the library's latency row calls obx_dispatcher_wake().
//   Maintenance and cron (supervise, schedule) are off in the bench's
//   processes: they run on their own timers, outside the measured path.
// pg-transactional-outbox: enqueue the outbox writer of
//   initializeMessageStorage() in a transaction of the caller (BEGIN, store,
//   COMMIT; 100 stores per transaction for the batch); messages are
//   concurrency 'parallel' (the library's drain row has no ordering).
//   Worker: the polling listener (initializePollingMessageListener), batch
//   size 100, polling interval 500 ms and lock 5 s (its defaults). With two
//   listeners, a handler's NOWAIT lock of its message can collide with the
//   other listener's polling function, which locks every candidate row in
//   turn: the message is retried when its lock expires, and may end
//   abandoned after 5 attempts (counted and printed; a 30 s lock made such
//   a drain wait 30 s per collision instead). Max-attempts and
//   poisonous-message protection off (its outbox defaults), cleanup timer
//   off. Its replication listener needs wal_level=logical and a replication
//   role, which make bench's cluster does not have: not measured.
//   Tables and polling function from its DatabaseSetup helper; the listener
//   and handler roles are the cluster's superuser (no grants).
//
// A drain ends when the peer's table says every message is finished
// (graphile: no job row left; pg-boss: state completed; outbox:
// processed_at set), not when the handlers have run: the completions are
// durable then, as the library's acks are when its drain ends.
import { createRequire } from 'node:module';
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const pg = require('pg');

const [peer, workload, nArg] = process.argv.slice(2);
const N = Math.ceil((Number(nArg) || 20000) / 100) * 100;
const [host, port, database, user] = (process.env.PEERS_PG || '127.0.0.1:5432:postgres:postgres').split(':');
const conn = { host, port: Number(port), database, user };
const url = `postgres://${user}@${host}:${port}/${database}`;
const QUEUE = 'bench';
const TIMEOUT_S = Number(process.env.PEERS_TIMEOUT) || 900;
const DATA = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(6).slice(0, 175); // {"event":"bench","data":"..."} = 200 chars
const payload = () => ({ event: 'bench', data: DATA });
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function die(msg) {
  console.error(`bench-peers ${peer} ${workload}: ${msg}`);
  process.exit(1);
}

async function sql(text, params) {
  const c = new pg.Client(conn);
  await c.connect();
  try {
    return await c.query(text, params);
  } finally {
    await c.end();
  }
}

// ---- the peers ----------------------------------------------------------------------------------

const graphile = {
  async reset() {
    const { runMigrations } = require('graphile-worker');
    await runMigrations({ connectionString: url, logger: quietGraphileLogger() });
    await sql('TRUNCATE graphile_worker._private_jobs CASCADE');
  },
  async producer() {
    const { makeWorkerUtils } = require('graphile-worker');
    const u = await makeWorkerUtils({ connectionString: url, logger: quietGraphileLogger() });
    return {
      one: () => u.addJob(QUEUE, payload()),
      batch: (k) => u.addJobs(Array.from({ length: k }, () => ({ identifier: QUEUE, payload: payload() }))),
      send: (p) => u.addJob(QUEUE, p),
      close: () => u.release(),
    };
  },
  analyze: () => sql('VACUUM ANALYZE graphile_worker._private_jobs'),
  remaining: async () => Number((await sql('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n),
  async worker(onMessage) {
    const { run } = require('graphile-worker');
    const runner = await run({
      connectionString: url,
      concurrency: 10,
      noHandleSignals: true,
      pollInterval: 2000,
      logger: quietGraphileLogger(),
      taskList: { [QUEUE]: async (p) => onMessage(p) },
      preset: { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0 } },
    });
    return { stop: () => runner.stop() };
  },
};

function quietGraphileLogger() {
  const { Logger } = require('graphile-worker');
  return new Logger(() => (level, message) => {
    if (level === 'error') console.error(message);
  });
}

const pgboss = {
  async boss() {
    const PgBoss = require('pg-boss');
    const b = new PgBoss({ connectionString: url, supervise: false, schedule: false });
    b.on('error', (e) => console.error('pg-boss:', e.message));
    await b.start();
    return b;
  },
  async reset() {
    // A fresh schema: its deleteQueue() refuses a queue that still has jobs.
    await sql('DROP SCHEMA IF EXISTS pgboss CASCADE');
    const b = await this.boss();
    await b.createQueue(QUEUE);
    await b.stop({ graceful: false, wait: true });
  },
  async producer() {
    const b = await this.boss();
    return {
      boss: b,
      one: () => b.send(QUEUE, payload()),
      batch: (k) => b.insert(Array.from({ length: k }, () => ({ name: QUEUE, data: payload() }))),
      send: (p) => b.send(QUEUE, p),
      close: () => b.stop({ graceful: false, wait: true }),
    };
  },
  analyze: () => sql('VACUUM ANALYZE pgboss.job'),
  remaining: async () =>
    Number((await sql(`SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state NOT IN ('completed', 'failed')`, [QUEUE])).rows[0].n),
  lost: async () => Number((await sql(`SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'failed'`, [QUEUE])).rows[0].n),
  async worker(onMessage, b) {
    const own = !b;
    if (own) b = await this.boss();
    const ref = {};
    ref.id = await b.work(QUEUE, { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const j of jobs) onMessage(j.data);
      if (jobs.length === 100 && ref.id) b.notifyWorker(ref.id);
    });
    return { boss: b, id: ref.id, stop: () => (own ? b.stop({ graceful: true, wait: true }) : b.offWork(QUEUE)) };
  },
};

const outboxSettings = {
  dbSchema: 'public',
  dbTable: 'outbox',
  nextMessagesFunctionName: 'next_outbox_messages',
  nextMessagesBatchSize: 100,
  nextMessagesPollingIntervalInMs: 500,
  enableMaxAttemptsProtection: false,
  enablePoisonousMessageProtection: false,
  messageCleanupIntervalInMs: 0,
};

function outboxLogger() {
  const { getDefaultLogger } = require('pg-transactional-outbox');
  const l = getDefaultLogger('bench');
  l.level = 'error';
  return l;
}

const outbox = {
  async reset() {
    const { DatabaseSetup } = require('pg-transactional-outbox');
    const cfg = { outboxOrInbox: 'outbox', database, schema: 'public', table: 'outbox', listenerRole: user, nextMessagesName: 'next_outbox_messages' };
    await sql(DatabaseSetup.dropAndCreateTable(cfg) + DatabaseSetup.createPollingFunction(cfg) + DatabaseSetup.setupPollingIndexes(cfg));
  },
  async producer() {
    const { initializeMessageStorage } = require('pg-transactional-outbox');
    const store = initializeMessageStorage({ outboxOrInbox: 'outbox', settings: outboxSettings }, outboxLogger());
    const c = new pg.Client(conn);
    await c.connect();
    const msg = (p) => ({
      id: randomUUID(),
      aggregateType: 'bench',
      aggregateId: '1',
      messageType: 'bench.event',
      payload: p,
      concurrency: 'parallel',
      createdAt: new Date().toISOString(),
    });
    const tx = async (k, p) => {
      await c.query('BEGIN');
      for (let i = 0; i < k; i++) await store(msg(p || payload()), c);
      await c.query('COMMIT');
    };
    return { one: () => tx(1), batch: (k) => tx(k), send: (p) => tx(1, p), close: () => c.end() };
  },
  analyze: () => sql('VACUUM ANALYZE public.outbox'),
  remaining: async () =>
    Number((await sql('SELECT count(*) AS n FROM public.outbox WHERE processed_at IS NULL AND abandoned_at IS NULL')).rows[0].n),
  lost: async () => Number((await sql('SELECT count(*) AS n FROM public.outbox WHERE abandoned_at IS NOT NULL')).rows[0].n),
  async worker(onMessage) {
    const { initializePollingMessageListener } = require('pg-transactional-outbox');
    const [shutdown] = initializePollingMessageListener(
      { outboxOrInbox: 'outbox', dbListenerConfig: conn, settings: outboxSettings },
      { handle: async (m) => onMessage(m.payload) },
      outboxLogger(),
    );
    return { stop: shutdown };
  },
};

const peers = { graphile, pgboss, outbox };
const P = peers[peer];
if (!P) die(`unknown peer (graphile, pgboss, outbox)`);

// ---- drain: worker processes that connect first and start together ---------------------------------

if (process.env.PEERS_CHILD) {
  // A drain worker: report "ready", wait for "go", start the peer's worker
  // and report how many messages it has handled (at most every 2 ms).
  let handled = 0, sent = 0, timer = null;
  const flush = () => {
    timer = null;
    if (handled !== sent) process.send({ handled: handled - sent }), (sent = handled);
  };
  const onMessage = () => {
    handled++;
    if (!timer) timer = setTimeout(flush, 2);
  };
  let w;
  process.on('message', async (m) => {
    if (m === 'go') w = await P.worker(onMessage);
    if (m === 'stop') {
      await w.stop();
      process.exit(0);
    }
  });
  process.send('ready');
} else {
  await main();
}

async function drain(workers) {
  await P.reset();
  const p = await P.producer();
  for (let i = 0; i < N; i += 100) await p.batch(100);
  await p.close();
  await P.analyze();
  const kids = Array.from({ length: workers }, () => fork(new URL(import.meta.url).pathname, process.argv.slice(2), { env: { ...process.env, PEERS_CHILD: '1' } }));
  await Promise.all(kids.map((k) => new Promise((r) => k.once('message', r))));
  let handled = 0;
  let done;
  const all = new Promise((r) => (done = r));
  for (const k of kids)
    k.on('message', (m) => {
      handled += m.handled || 0;
      if (handled >= N) done();
    });
  const t0 = now();
  const late = () => now() - t0 > TIMEOUT_S * 1000 && die(`the drain took more than ${TIMEOUT_S} s (PEERS_TIMEOUT)`);
  for (const k of kids) k.send('go');
  // Until the handlers have run N times; a check a second in case fewer
  // ran (a message the peer gave up on), then until the table says done.
  while (handled < N && (await Promise.race([all.then(() => 0), sleep(1000).then(() => 1)])) && (await P.remaining()) > 0) late();
  while ((await P.remaining()) > 0) late(), await sleep(5);
  const t = (now() - t0) / 1000;
  const lost = P.lost ? await P.lost() : 0;
  if (lost) console.error(`bench-peers ${peer} ${workload}: ${lost} of ${N} messages given up on (failed / abandoned)`);
  await Promise.all(kids.map((k) => new Promise((r) => (k.once('exit', r), k.send('stop')))));
  if (handled !== N) console.error(`bench-peers ${peer}: ${handled} handled for ${N} messages (redeliveries)`);
  return N / t;
}

async function enqueue(batch) {
  await P.reset();
  const p = await P.producer();
  const count = batch ? N : N / 4;
  const t0 = now();
  for (let i = 0; i < count; i += batch ? 100 : 1) await (batch ? p.batch(100) : p.one());
  const t = (now() - t0) / 1000;
  await p.close();
  return count / t;
}

async function latency(count) {
  await P.reset();
  const p = await P.producer();
  const samples = [];
  let seen = 0;
  const w = await P.worker((data) => {
    if (data && data.stamp) samples.push(now() - data.stamp);
    seen++;
  }, p.boss);
  await sleep(1000); // the worker is listening / has polled once
  for (let i = 0; i < count; i++) {
    await sleep(3);
    await p.send({ stamp: now() });
    if (p.boss) p.boss.notifyWorker(w.id);
    for (const t0 = now(); seen <= i; ) {
      if (now() - t0 > 10000) die(`message ${i} not handled within 10 s`);
      await sleep(0.05);
    }
  }
  await w.stop();
  await p.close();
  samples.sort((a, b) => a - b);
  return [samples[Math.floor(count / 2)], samples[Math.floor((count * 99) / 100)]];
}

async function main() {
  let r;
  switch (workload) {
    case 'enq1': r = [await enqueue(false)]; break;
    case 'enqb': r = [await enqueue(true)]; break;
    case 'drain1': r = [await drain(1)]; break;
    case 'drain2': r = [await drain(2)]; break;
    case 'latency': r = await latency(Number(process.env.PEERS_LATENCY_N) || 200); break;
    default: die('unknown workload (enq1, enqb, drain1, drain2, latency)');
  }
  console.log(`RESULT ${peer} ${workload} ${r.map((x) => x.toFixed(x < 100 ? 2 : 0)).join(' ')}`);
  process.exit(0);
}
