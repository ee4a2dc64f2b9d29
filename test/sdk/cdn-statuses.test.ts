import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { createClient, SvcServerError } from 'svc-platform/sdk';

/**
 * The statuses a CDN in front of the API answers for it (retry-policy.ts CDN_STATUSES): 520 and 524 may follow
 * work the origin did, so a write answered so is looked up as after a 502 or 504, and is of unknown outcome
 * when nothing can look; 521, 522 and 523 never reached the origin, so a write is resent as after a 503. Before,
 * all were "any other error": thrown at once, an execute that had traded reported as failed. Against a local
 * server that plays the CDN.
 */
const credentials = { apiKey: 'k', apiSecret: 'c2VjcmV0', passphrase: 'p' };
const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

/** A server answering `first` to the first POST, then as the API would; every request logged. */
async function behindCdn(first: number, traded: boolean) {
  const log: string[] = [];
  let posts = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      log.push(`${req.method} ${req.url?.split('?')[0]}`);
      if (req.method === 'POST' && ++posts === 1)
        return res.writeHead(first, { 'content-type': 'text/html' }).end('<html>cdn</html>');
      if (req.url?.startsWith('/trades'))
        return json(res, 200, {
          message: traded ? [{ trade_id: 't1', client_trade_id: 'q1' }] : [],
          page: 1,
          page_size: 50,
          total_pages: 1,
        });
      if (req.url === '/liquidity/execute')
        return json(res, 200, { message: { trade_id: 't2', quote_id: 'q1' } });
      json(res, 200, { message: { ok: true } });
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = createClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ...credentials,
    retry: { sleep: async () => {} },
  });
  return { client, log };
}

for (const status of [520, 524]) {
  test(`an execute answered ${status} is looked up before anything is resent: the trade it made is found`, async () => {
    const { client, log } = await behindCdn(status, true);
    const result = await client.quotes.executeLiquidityQuote('q1');
    assert.equal(result.outcome, 'found');
    assert.equal(result.trade_id, 't1');
    assert.deepEqual(log, ['POST /liquidity/execute', 'GET /trades']);
  });

  test(`a write without a look-up answered ${status} is of unknown outcome`, async () => {
    const { client, log } = await behindCdn(status, false);
    await assert.rejects(client.http.request('POST', '/fund/rfq', { body: {} }), (e: unknown) => {
      assert.ok(e instanceof SvcServerError, String(e));
      assert.equal(e.status, status);
      assert.equal(e.outcomeUnknown, true);
      return true;
    });
    assert.deepEqual(log, ['POST /fund/rfq'], 'not resent');
  });
}

for (const status of [521, 522, 523]) {
  test(`a write answered ${status} never reached the API: resent as after a 503`, async () => {
    const { client, log } = await behindCdn(status, false);
    assert.deepEqual(await client.http.request('POST', '/fund/rfq', { body: {} }), { message: { ok: true } });
    assert.deepEqual(log, ['POST /fund/rfq', 'POST /fund/rfq']);
  });
}
