import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Headers as UndiciHeaders } from 'undici';
import { connect, type AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { runInNewContext } from 'node:vm';
import {
  HOOK_NOTIFICATION_ID_HEADER,
  HOOK_PAYLOAD_TYPE_HEADER,
  HOOK_SIGNATURE_HEADER,
  HOOK_TIMESTAMP_HEADER,
  STANDARD_WEBHOOK_ID_HEADER,
  STANDARD_WEBHOOK_SIGNATURE_HEADER,
  STANDARD_WEBHOOK_TIMESTAMP_HEADER,
} from '../../src/contract/webhook-headers.ts';
import { webhookDeliveryHeaders } from '../../src/contract/webhook-signature.ts';
import { WebhookVerificationError, verifyWebhook } from '../../src/sdk/webhook-verify.ts';

const SECRET = 'whk_test_secret';
const BODY = '{"trade_id":"3fc51610-3dd9-409f-b531-38f78de8ca8a","status":"accepted"}';
const ID = '5b1c1d8e-0c36-4b8e-9c41-7f6a2f0e9a10';
const TS_MS = 1714445421123;
const headers = webhookDeliveryHeaders({
  payloadType: 'trade_status_changed',
  notificationId: ID,
  timestampMs: TS_MS,
  rawBody: BODY,
  secret: SECRET,
});
const SVC_SIGNATURE = headers[HOOK_SIGNATURE_HEADER]!;
const STANDARD_SIGNATURE = headers[STANDARD_WEBHOOK_SIGNATURE_HEADER]!;
/** A well-formed Standard Webhooks entry that is not ours (another key, during a rotation). */
const OTHER_SIGNATURE = `v1,${'A'.repeat(43)}=`;
const standardOnly = {
  [HOOK_PAYLOAD_TYPE_HEADER]: headers[HOOK_PAYLOAD_TYPE_HEADER]!,
  [STANDARD_WEBHOOK_ID_HEADER]: ID,
  [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: headers[STANDARD_WEBHOOK_TIMESTAMP_HEADER]!,
};
const svcOnly = {
  [HOOK_PAYLOAD_TYPE_HEADER]: headers[HOOK_PAYLOAD_TYPE_HEADER]!,
  [HOOK_NOTIFICATION_ID_HEADER]: ID,
  [HOOK_TIMESTAMP_HEADER]: String(TS_MS),
};
const at = (ms: number) => () => ms;

function rejects(fn: () => unknown, reason: WebhookVerificationError['reason'], header?: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(
      err instanceof WebhookVerificationError,
      `expected a WebhookVerificationError, got ${String(err)}`,
    );
    assert.equal(err.reason, reason, err.message);
    if (header) assert.equal(err.header, header);
    return true;
  });
}

describe('verifyWebhook: arguments of another type', () => {
  test('headers or a secret that are not what they must be are refused naming the argument', () => {
    // Failed with "Cannot read properties of null (reading 'get')" or a crypto error naming a "key" (review).
    for (const bad of [null, undefined, 'x-svc-hook-signature: abc']) {
      assert.throws(
        () => verifyWebhook(BODY, bad as unknown as Record<string, string>, SECRET),
        (err: unknown) => err instanceof TypeError && /request headers .* second argument/.test(err.message),
      );
    }
    for (const bad of [undefined, 123, '', Buffer.alloc(0), { secret: SECRET }]) {
      assert.throws(
        () => verifyWebhook(BODY, headers, bad as unknown as string, { now: at(TS_MS) }),
        (err: unknown) => err instanceof TypeError && /webhook secret, a non-empty string/.test(err.message),
      );
    }
    // The secret's bytes as a Buffer verify as the string does.
    const verified = verifyWebhook(BODY, headers, Buffer.from(SECRET) as unknown as string, {
      now: at(TS_MS),
    });
    assert.equal(verified.notificationId, ID);
  });
});

describe('verifyWebhook: toleranceMs', () => {
  // 10 years after signing: any check at all refuses it.
  const muchLater = at(TS_MS + 10 * 365 * 24 * 3600 * 1000);

  for (const bad of [NaN, -1, -Infinity]) {
    test(`${bad} is refused with a RangeError naming the option, not taken as "no check"`, () => {
      assert.throws(
        () => verifyWebhook(BODY, headers, SECRET, { now: muchLater, toleranceMs: bad }),
        (err: unknown) => err instanceof RangeError && /options\.toleranceMs/.test(err.message),
      );
    });
  }

  test('a non-number is refused with a TypeError naming the option', () => {
    const options = { now: at(TS_MS), toleranceMs: '300000' as unknown as number };
    assert.throws(
      () => verifyWebhook(BODY, headers, SECRET, options),
      (err: unknown) => err instanceof TypeError && /options\.toleranceMs/.test(err.message),
    );
  });

  test('Infinity is the documented "no timestamp check" (e.g. re-verifying a stored delivery)', () => {
    const event = verifyWebhook(BODY, headers, SECRET, { now: muchLater, toleranceMs: Infinity });
    assert.equal(event.notificationId, ID);
    // The signature is still checked.
    rejects(
      () => verifyWebhook(`${BODY} `, headers, SECRET, { now: muchLater, toleranceMs: Infinity }),
      'invalid_signature',
    );
  });

  test('0 accepts only the exact millisecond', () => {
    assert.equal(verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS), toleranceMs: 0 }).timestamp, TS_MS);
    rejects(
      () => verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS + 1), toleranceMs: 0 }),
      'timestamp_out_of_tolerance',
    );
  });

  test('a clock that returns NaN is refused rather than passing every timestamp', () => {
    assert.throws(
      () => verifyWebhook(BODY, headers, SECRET, { now: () => NaN }),
      (err: unknown) => err instanceof TypeError && /options\.now/.test(err.message),
    );
  });
});

describe('verifyWebhook: several signatures', () => {
  test('webhook-signature given as an array of values is one list (Standard Webhooks allows several)', () => {
    for (const values of [
      [OTHER_SIGNATURE, STANDARD_SIGNATURE],
      [STANDARD_SIGNATURE, OTHER_SIGNATURE],
      [`${OTHER_SIGNATURE} ${STANDARD_SIGNATURE}`, OTHER_SIGNATURE],
      ['', STANDARD_SIGNATURE],
      [STANDARD_SIGNATURE],
    ]) {
      const event = verifyWebhook(
        BODY,
        { ...standardOnly, [STANDARD_WEBHOOK_SIGNATURE_HEADER]: values },
        SECRET,
        { now: at(TS_MS) },
      );
      assert.equal(event.notificationId, ID, JSON.stringify(values));
    }
  });

  test('webhook-signature values joined with ", " (a repeated header as Node joins it) verify with ours first or last', () => {
    for (const joined of [
      `${STANDARD_SIGNATURE}, ${OTHER_SIGNATURE}`,
      `${OTHER_SIGNATURE}, ${STANDARD_SIGNATURE}`,
    ]) {
      const event = verifyWebhook(
        BODY,
        { ...standardOnly, [STANDARD_WEBHOOK_SIGNATURE_HEADER]: joined },
        SECRET,
        { now: at(TS_MS) },
      );
      assert.equal(event.notificationId, ID, joined);
    }
  });

  test('an array with no matching signature is invalid_signature; an empty one is missing', () => {
    rejects(
      () =>
        verifyWebhook(
          BODY,
          { ...standardOnly, [STANDARD_WEBHOOK_SIGNATURE_HEADER]: [OTHER_SIGNATURE, 'v1,AAAA'] },
          SECRET,
          { now: at(TS_MS) },
        ),
      'invalid_signature',
      STANDARD_WEBHOOK_SIGNATURE_HEADER,
    );
    rejects(
      () =>
        verifyWebhook(BODY, { ...standardOnly, [STANDARD_WEBHOOK_SIGNATURE_HEADER]: [] }, SECRET, {
          now: at(TS_MS),
        }),
      'missing_header',
    );
  });

  test("the undici package's Headers (another class than the global one) is read as fetch Headers", () => {
    const verified = verifyWebhook(BODY, new UndiciHeaders(Object.entries(headers)), SECRET, {
      now: at(TS_MS),
    });
    assert.equal(verified.payloadType, 'trade_status_changed');
  });

  test('a repeated x-svc-hook-signature is malformed, in every header shape', () => {
    const shapes: Array<[string, Record<string, string | string[]> | Headers]> = [
      ['Node joined', { ...svcOnly, [HOOK_SIGNATURE_HEADER]: `${SVC_SIGNATURE}, ${SVC_SIGNATURE}` }],
      ['array', { ...svcOnly, [HOOK_SIGNATURE_HEADER]: [SVC_SIGNATURE, SVC_SIGNATURE] }],
      [
        'fetch Headers',
        new Headers([
          ...Object.entries(svcOnly),
          [HOOK_SIGNATURE_HEADER, SVC_SIGNATURE],
          [HOOK_SIGNATURE_HEADER, SVC_SIGNATURE],
        ]),
      ],
    ];
    for (const [, shape] of shapes) {
      rejects(
        () => verifyWebhook(BODY, shape, SECRET, { now: at(TS_MS) }),
        'malformed_header',
        HOOK_SIGNATURE_HEADER,
      );
    }
  });

  test('a real Node server: two webhook-signature headers verify from headers and headersDistinct', async () => {
    const server = createServer();
    const received = new Promise<{ headers: IncomingHttpHeaders; distinct: NodeJS.Dict<string[]> }>(
      (resolve) => {
        server.once('request', (req, res) => {
          resolve({ headers: req.headers, distinct: req.headersDistinct });
          req.resume();
          res.end();
        });
      },
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
      const lines = [
        'POST /hooks HTTP/1.1',
        'host: receiver',
        `content-length: ${Buffer.byteLength(BODY)}`,
        ...Object.entries(standardOnly).map(([name, value]) => `${name}: ${value}`),
        `${STANDARD_WEBHOOK_SIGNATURE_HEADER}: ${OTHER_SIGNATURE}`,
        `${STANDARD_WEBHOOK_SIGNATURE_HEADER}: ${STANDARD_SIGNATURE}`,
        'connection: close',
      ];
      socket.end(`${lines.join('\r\n')}\r\n\r\n${BODY}`);
      socket.resume();
      const { headers: joined, distinct } = await received;
      await once(socket, 'close');
      assert.deepEqual(distinct[STANDARD_WEBHOOK_SIGNATURE_HEADER], [OTHER_SIGNATURE, STANDARD_SIGNATURE]);
      const options = { now: at(TS_MS) };
      assert.equal(verifyWebhook(BODY, joined, SECRET, options).notificationId, ID);
      assert.equal(
        verifyWebhook(BODY, distinct as Record<string, string[]>, SECRET, options).notificationId,
        ID,
      );
    } finally {
      server.close();
      await once(server, 'close');
    }
  });
});

describe('verifyWebhook: what the result says, and bytes from elsewhere', () => {
  test('notificationIdSigned: true when the Standard Webhooks signature covers the id, false with ours alone', () => {
    const both = verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS) });
    assert.equal(both.notificationIdSigned, true);
    const standard = verifyWebhook(
      BODY,
      { ...standardOnly, [STANDARD_WEBHOOK_SIGNATURE_HEADER]: STANDARD_SIGNATURE },
      SECRET,
      { now: at(TS_MS) },
    );
    assert.equal(standard.notificationIdSigned, true);
    // Ours alone: a replay may carry another id, and it is returned, unsigned (review).
    const replayed = verifyWebhook(
      BODY,
      { ...svcOnly, [HOOK_SIGNATURE_HEADER]: SVC_SIGNATURE, [HOOK_NOTIFICATION_ID_HEADER]: 'another-id' },
      SECRET,
      { now: at(TS_MS) },
    );
    assert.deepEqual([replayed.notificationId, replayed.notificationIdSigned], ['another-id', false]);
  });

  test('a Uint8Array or ArrayBuffer from another realm (a vm context) is the raw body too', () => {
    // The body is ASCII: its bytes are its character codes, made by the other realm's own Uint8Array.
    const foreign = runInNewContext(
      '(text) => { const bytes = new Uint8Array(text.length); for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i); return [bytes, bytes.buffer]; }',
    ) as (text: string) => [Uint8Array, ArrayBuffer];
    const [bytes, buffer] = foreign(BODY);
    assert.equal(bytes instanceof Uint8Array, false, 'another realm');
    for (const raw of [bytes, buffer])
      assert.equal(verifyWebhook(raw, headers, SECRET, { now: at(TS_MS) }).notificationId, ID);
  });
});
