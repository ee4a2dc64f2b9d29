import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PgListener } from '../../src/store/pg-listener.ts';
import { createTestDatabaseWithClient, type TestDatabaseWithClient } from '../helpers/database.ts';
import { waitFor } from '../helpers/webhook-receiver.ts';

/**
 * The process's one LISTEN connection (cache invalidation and webhook wake-ups share it): every channel is
 * heard on it, each channel's owner is told after every (re)connection, and a dropped connection comes back
 * listening on every channel.
 */
let testDb: TestDatabaseWithClient;
before(async () => {
  testDb = await createTestDatabaseWithClient();
});
after(() => testDb?.close());

function channelLog() {
  const log = { messages: [] as string[], connected: 0 };
  return {
    log,
    handlers: {
      onMessage: (payload: string) => log.messages.push(payload),
      onConnected: () => log.connected++,
    },
  };
}

/** Backends of the test database whose last statement was a LISTEN or UNLISTEN: the listener's. */
async function listenerBackends(): Promise<number[]> {
  const r = await testDb.client.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
       and (query ilike 'listen %' or query ilike 'unlisten %')`,
  );
  return r.rows.map((row) => row.pid);
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
