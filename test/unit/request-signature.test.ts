import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  AUTH_HEADERS,
  signatureMatches,
  signingMessage,
  signRequest,
} from '../../src/contract/request-signature.ts';
import { SvcClient } from '../../src/sdk/client.ts';

// wire-contract §1 test vectors.
const SECRET = '2mC4ZvVd4goRkuJm+rjr9byUiaUW1b6tVN4xy9QXNSE=';
const VECTORS = [
  {
    timestamp: '1714445421',
    method: 'GET',
    route:
      '/accounts?account_owner=00SCXM&account_group=BBLGTW&account_label=general&account_type=available&asset=USD',
    body: undefined,
    message:
      '1714445421GET/accounts?account_owner=00SCXM&account_group=BBLGTW&account_label=general&account_type=available&asset=USD{}',
    signed: 'pymOdsOeF7pFtY2bbooowg71Wj7atPAbgLx914sRPbs=',
  },
  {
    timestamp: '1714445704',
    method: 'POST',
    route: '/convert_withdraw/execute',
    body: '{"quote_id":"3fc51610-3dd9-409f-b531-38f78de8ca8a"}',
    message: '1714445704POST/convert_withdraw/execute{"quote_id":"3fc51610-3dd9-409f-b531-38f78de8ca8a"}',
    signed: '7SwJyWdDvInzNmzKHOC4SVpLuMrops/xG8DbucYpV50=',
  },
  {
    timestamp: '1788998400',
    method: 'POST',
    route: '/payments',
    body: '{"amount":"25.00"}',
    message: '1788998400POST/payments{"amount":"25.00"}',
    signed: 'm6O2GTfv+XPb2+/tcS5+lQ2kknFE4e34cGd2d41j5AY=',
  },
];

describe('wire-contract §1 signature vectors', () => {
  for (const v of VECTORS) {
    test(`${v.method} ${v.route} signs to ${v.signed}`, () => {
      const message = signingMessage(v.timestamp, v.method, v.route, v.body);
      assert.equal(message.toString('utf8'), v.message);
      assert.equal(signRequest(SECRET, message), v.signed);
      assert.equal(signRequest(SECRET, v.message), v.signed);
      assert.ok(signatureMatches(SECRET, message, v.signed));
    });
  }

  test('a request with no body signs the literal {} (so GET with or without a {} body verify alike)', () => {
    const v = VECTORS[0]!;
    for (const body of [undefined, '', Buffer.alloc(0), '{}', Buffer.from('{}')]) {
      assert.equal(signRequest(SECRET, signingMessage(v.timestamp, 'GET', v.route, body)), v.signed);
    }
  });

  test('the method is upper-cased; the route is signed exactly as sent (no re-encoding)', () => {
    const v = VECTORS[0]!;
    assert.equal(signRequest(SECRET, signingMessage(v.timestamp, 'get', v.route, undefined)), v.signed);
    const raw = signingMessage('1', 'DELETE', '/accounts/zrn:svc:us:account:customer:x/tenants/ABCDEF', '{}');
    const encoded = signingMessage(
      '1',
      'DELETE',
      '/accounts/zrn%3Asvc%3Aus%3Aaccount%3Acustomer%3Ax/tenants/ABCDEF',
      '{}',
    );
    assert.notEqual(signRequest(SECRET, raw), signRequest(SECRET, encoded));
    assert.ok(encoded.toString().includes('%3A'));
  });

  test('any change to timestamp, method, route, body or secret breaks the signature', () => {
    const v = VECTORS[1]!;
    const good = signingMessage(v.timestamp, v.method, v.route, v.body);
    assert.ok(signatureMatches(SECRET, good, v.signed));
    const variants = [
      signingMessage('1714445705', v.method, v.route, v.body),
      signingMessage(v.timestamp, 'PUT', v.route, v.body),
      signingMessage(v.timestamp, v.method, v.route + '?x=1', v.body),
      signingMessage(v.timestamp, v.method, v.route, v.body!.replace('3fc5', '3fc6')),
    ];
    for (const message of variants) assert.equal(signatureMatches(SECRET, message, v.signed), false);
    const otherSecret = Buffer.alloc(32, 7).toString('base64');
    assert.equal(signatureMatches(otherSecret, good, v.signed), false);
  });

  test('malformed or truncated presented signatures are refused without throwing', () => {
    const v = VECTORS[2]!;
    const message = signingMessage(v.timestamp, v.method, v.route, v.body);
    // node's base64 decoder would read the last four as the same bytes: only the exact text may verify.
    const spellings = [
      v.signed + 'AAAA',
      v.signed.replace('=', ''),
      v.signed.replaceAll('+', '-').replaceAll('/', '_'),
      ` ${v.signed}`,
    ];
    for (const presented of ['', 'not base64 at all!!', v.signed.slice(0, 20), '===', ...spellings]) {
      assert.equal(signatureMatches(SECRET, message, presented), false, presented);
    }
  });
});

describe('SDK client signs as wire-contract §1', () => {
  let server: Server;
  let baseUrl: string;
  const seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: string }> = [];

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          method: req.method!,
          url: req.url!,
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"message":{}}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const clientAt = (timestampS: string) =>
    new SvcClient({
      baseUrl,
      apiKey: 'vector-key',
      apiSecret: SECRET,
      passphrase: 'vector-passphrase',
      now: () => Number(timestampS) * 1000 + 999,
      retry: false,
    });

  test('GET with a query: the vector signature, the target sent exactly as signed', async () => {
    const v = VECTORS[0]!;
    await clientAt(v.timestamp).send('GET', '/accounts', {
      query: {
        account_owner: '00SCXM',
        account_group: 'BBLGTW',
        account_label: 'general',
        account_type: 'available',
        asset: 'USD',
      },
    });
    const req = seen.at(-1)!;
    assert.equal(req.url, v.route);
    assert.equal(req.headers[AUTH_HEADERS.signed], v.signed);
    assert.equal(req.headers[AUTH_HEADERS.timestamp], v.timestamp);
    assert.equal(req.headers[AUTH_HEADERS.apiKey], 'vector-key');
    assert.equal(req.headers[AUTH_HEADERS.passphrase], 'vector-passphrase');
  });

  for (const v of VECTORS.slice(1)) {
    test(`POST ${v.route}: the vector signature over the exact body bytes sent`, async () => {
      await clientAt(v.timestamp).send('POST', v.route, { body: JSON.parse(v.body!) });
      const req = seen.at(-1)!;
      assert.equal(req.body, v.body);
      assert.equal(req.headers[AUTH_HEADERS.signed], v.signed);
      assert.equal(req.headers['content-type'], 'application/json');
    });
  }
});
