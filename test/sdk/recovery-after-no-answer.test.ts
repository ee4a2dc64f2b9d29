import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { createClient, SvcAbortedError, SvcNotFoundError } from 'svc-platform/sdk';

/**
 * Spec 7.2's recovery of an execute answered 404, when an earlier attempt of the same call got no answer: that
 * attempt may still be carried out (the server answers 404 to a resend of a quote whose first execution has
 * not committed yet, or that expired while it was under way), so an empty look-up does not show the quote
 * expired unexecuted. The call's error says the outcome is unknown, and no new quote is executed (review: it
 * was thrown as known not done, and with allowRequote a second trade could be made). Against a local server
 * that never answers the first execute; the client gives up on it after 200 ms.
 */
const credentials = { apiKey: 'k', apiSecret: 'c2VjcmV0', passphrase: 'p' };
const servers: Server[] = [];
after(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

/** A server whose first execute never answers and whose later ones answer 404; no trade is ever found. */
async function firstExecuteUnanswered(onLookUp?: (n: number) => void) {
  const log: string[] = [];
  let executes = 0;
  let lookUps = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      log.push(`${req.method} ${req.url?.split('?')[0]}`);
      if (req.method === 'POST' && req.url === '/liquidity/execute') {
        if (++executes === 1) return; // under way, never answered
        return json(res, 404, { error: 'Not Found' });
      }
      if (req.url?.startsWith('/trades')) {
        onLookUp?.(++lookUps);
        return json(res, 200, { message: [], page: 1, page_size: 50, total_pages: 1 });
      }
      if (req.url?.startsWith('/liquidity/rfq'))
        return json(res, 201, { message: { quote_id: `q${log.length}` } });
      json(res, 500, { error: 'Internal Server Error' });
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = createClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ...credentials,
    timeoutMs: 200,
    retry: { sleep: async () => {} },
  });
  return { client, log };
}

const rejection = (call: Promise<unknown>) =>
  call.then(
    () => assert.fail('expected the call to fail'),
    (e: unknown) => e,
  );

test('a 404 after an unanswered attempt, with no trade found: the outcome is unknown', async () => {
  const { client, log } = await firstExecuteUnanswered();
  const error = await rejection(client.quotes.executeLiquidityQuote('q1'));
  assert.ok(error instanceof SvcNotFoundError, String(error));
  assert.equal(error.outcomeUnknown, true);
  // No answer → look → nothing → resend → 404 → look again.
  assert.deepEqual(log, ['POST /liquidity/execute', 'GET /trades', 'POST /liquidity/execute', 'GET /trades']);
});

test('with allowRequote, no new quote is executed while the first attempt may still execute', async () => {
  const { client, log } = await firstExecuteUnanswered();
  const error = await rejection(
    client.quotes.quoteAndExecuteLiquidity(
      { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '1' },
      { retry: { allowRequote: true } },
    ),
  );
  assert.ok(error instanceof SvcNotFoundError, String(error));
  assert.equal(error.outcomeUnknown, true);
  assert.equal(log.filter((l) => l === 'GET /liquidity/rfq').length, 1, 'one quote only');
  assert.equal(log.filter((l) => l === 'POST /liquidity/execute').length, 2, 'that quote only');
});

test('aborted while the recovery looks: the write of unknown outcome is said so', async () => {
  const controller = new AbortController();
  // The second look-up is the 404's recovery: the caller gives up while it is under way.
  const { client } = await firstExecuteUnanswered((n) => {
    if (n === 2) controller.abort(new Error('user gave up'));
  });
  const error = await rejection(client.quotes.executeLiquidityQuote('q1', { signal: controller.signal }));
  assert.ok(error instanceof SvcAbortedError, String(error));
  assert.equal(error.outcomeUnknown, true);
});
