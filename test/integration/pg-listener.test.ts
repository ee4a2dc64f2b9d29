import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PgListener } from '../../src/store/pg-listener.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { createTestDatabaseWithClient, type TestDatabaseWithClient } from '../helpers/database.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/webhook-receiver.ts';

/**
 * The process's one LISTEN connection (cache invalidation and webhook wake-ups share it): every channel is
 * heard on it, each channel's owner is told after every (re)connection, and a dropped connection comes back
 * listening on every channel, as does one that went silent without closing.
 */
let testDb: TestDatabaseWithClient;
before(async () => {
  testDb = await createTestDatabaseWithClient();
});
after(() => testDb?.close());

function channelLog() {
  const log = { messages: [] as string[], connected: 0, reconnected: 0 };
  return {
    log,
    handlers: {
      onMessage: (payload: string) => log.messages.push(payload),
      onConnected: () => log.connected++,
      onReconnected: () => log.reconnected++,
    },
  };
}

/** Backends of the test database that are a listener's (it names its connection). */
async function listenerBackends(): Promise<number[]> {
  const r = await testDb.client.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
       and application_name = 'svc-platform listener'`,
  );
  return r.rows.map((row) => row.pid);
}

/** Fails unless `work` settles within `ms`: a hang becomes a failure rather than a stuck test. */
async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, hang]);
  } finally {
    clearTimeout(timer);
  }
}

test('two channels on one connection; after the connection is killed, both are listened again', async () => {
  const listener = new PgListener(testDb.database.url);
  const a = channelLog();
  const b = channelLog();
  try {
    await listener.listen('svc_test_a', a.handlers); // before start: listened at connection
    await listener.start();
    await listener.listen('svc_test_b', b.handlers); // after start: listened at once
    assert.equal(a.log.connected, 1);
    assert.equal(b.log.connected, 1);
    assert.deepEqual(
      [a.log.reconnected, b.log.reconnected],
      [0, 0],
      'the first connection is no reconnection',
    );
    assert.equal((await listenerBackends()).length, 1, 'one connection for both channels');

    await testDb.client.query(`select pg_notify('svc_test_a', 'one'), pg_notify('svc_test_b', 'two')`);
    await waitFor(() => a.log.messages.length === 1 && b.log.messages.length === 1, 'both notifications');
    assert.deepEqual([a.log.messages, b.log.messages], [['one'], ['two']]);

    // The server drops the connection: each owner hears of it (it may have missed something) and again
    // once it is back, listening on both channels.
    const [pid] = await listenerBackends();
    await testDb.client.query('select pg_terminate_backend($1)', [pid]);
    await waitFor(
      () => a.log.connected >= 3 && b.log.connected >= 3,
      'told of the drop and the reconnection',
    );
    await waitFor(async () => (await listenerBackends()).length === 1, 'listening again', 10_000);
    await waitFor(() => a.log.reconnected === 1 && b.log.reconnected === 1, 'told of the reconnection, once');
    await testDb.client.query(`select pg_notify('svc_test_a', 'three'), pg_notify('svc_test_b', 'four')`);
    await waitFor(
      () => a.log.messages.length === 2 && b.log.messages.length === 2,
      'heard after reconnecting',
    );
    assert.deepEqual(
      [a.log.messages, b.log.messages],
      [
        ['one', 'three'],
        ['two', 'four'],
      ],
    );

    // One owner leaves; the other keeps the connection.
    await listener.unlisten('svc_test_a');
    await testDb.client.query(`select pg_notify('svc_test_a', 'five'), pg_notify('svc_test_b', 'six')`);
    await waitFor(() => b.log.messages.length === 3, 'b still heard');
    assert.deepEqual(a.log.messages, ['one', 'three'], 'a no longer heard');
    await assert.rejects(listener.listen('svc_test_b', b.handlers), /already listening/);
  } finally {
    await listener.stop();
  }
});

test('a connection that goes silent without closing is noticed by the heartbeat and replaced', async () => {
  // A black hole between the listener and the server, as in a partition or a failover that leaves the
  // connection half-open: no error and no end reach the client, only silence.
  const proxy = await startTcpProxy(testDb.database.url);
  const listener = new PgListener(proxy.url, { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 500 });
  const a = channelLog();
  const b = channelLog();
  const notify = (payload: string) =>
    testDb.client.query(`select pg_notify('svc_test_c', $1), pg_notify('svc_test_d', $1)`, [payload]);
  try {
    await listener.listen('svc_test_c', a.handlers);
    await listener.start();
    await listener.listen('svc_test_d', b.handlers);
    await notify('before');
    await waitFor(() => a.log.messages.includes('before') && b.log.messages.includes('before'), 'heard');

    const told = [a.log.connected, b.log.connected] as const;
    proxy.freeze();
    // Each owner is told the connection is lost (it may miss notifications): nothing else would tell it.
    await waitFor(
      () => a.log.connected > told[0] && b.log.connected > told[1],
      'the silent connection noticed',
      10_000,
    );

    // The frozen connection stays silent for good; a new one listens on both channels again. Until it
    // does, notifications are lost, so each attempt sends one.
    proxy.thaw();
    let attempt = 0;
    await waitFor(
      async () => {
        const payload = `after ${++attempt}`;
        await notify(payload);
        await new Promise((resolve) => setTimeout(resolve, 100));
        return a.log.messages.includes(payload) && b.log.messages.includes(payload);
      },
      'both channels heard on a new connection',
      15_000,
    );
  } finally {
    await proxy.close(); // first: it cuts a frozen connection that would hold stop() up if it failed
    await listener.stop();
  }
});

test('stop() does not wait for the goodbye of a server that went silent', async () => {
  const proxy = await startTcpProxy(testDb.database.url);
  // No heartbeat in flight: stop() finds the silent connection idle and must not end it gracefully only.
  const listener = new PgListener(proxy.url, { heartbeatIntervalMs: 60_000, heartbeatTimeoutMs: 500 });
  const e = channelLog();
  try {
    await listener.listen('svc_test_e', e.handlers);
    await listener.start();
    await testDb.client.query(`select pg_notify('svc_test_e', 'connected')`);
    await waitFor(() => e.log.messages.includes('connected'), 'listening through the proxy');
    proxy.freeze();
    await within(listener.stop(), 10_000, 'stop() with a silent connection');
  } finally {
    await proxy.close();
    await listener.stop();
  }
});

test('a lost connection is logged once while it stays down, and once when it listens again', async () => {
  const proxy = await startTcpProxy(testDb.database.url);
  const { logger, lines } = capturedLogger('info');
  const listener = new PgListener(proxy.url, { logger });
  const said = (text: string) => lines.filter((line) => line.includes(text)).length;
  try {
    const channel = channelLog();
    await listener.listen('svc_test_e', channel.handlers);
    await listener.start();
    assert.equal(lines.length, 0, 'nothing to say while it listens');
    await proxy.down(); // dropped, and each reconnection (one a second) refused
    // Its owners are told at the loss and at each failed reconnection: two of those.
    await waitFor(() => channel.log.connected >= 4, 'two reconnections refused', 10_000);
    assert.equal(said('LISTEN connection lost'), 1, 'logged once, not once per failed reconnection');
    await proxy.up();
    await waitFor(() => said('LISTEN connection listening again') === 1, 'the recovery logged', 10_000);
    assert.equal(said('LISTEN connection lost'), 1);
  } finally {
    await listener.stop();
    await proxy.close();
  }
});
