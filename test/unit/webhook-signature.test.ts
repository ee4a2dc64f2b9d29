import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';

import { Webhook } from 'standardwebhooks';

import {
  HOOK_NOTIFICATION_ID_HEADER,
  HOOK_PAYLOAD_TYPE_HEADER,
  HOOK_SIGNATURE_256_HEADER,
  HOOK_SIGNATURE_HEADER,
  HOOK_TIMESTAMP_HEADER,
  STANDARD_WEBHOOK_ID_HEADER,
  STANDARD_WEBHOOK_SIGNATURE_HEADER,
  STANDARD_WEBHOOK_TIMESTAMP_HEADER,
  WEBHOOK_PAYLOAD_TYPES,
  isWebhookPayloadType,
} from '../../src/contract/webhook-headers.ts';
import {
  signWebhook,
  standardWebhooksSecret,
  webhookDeliveryHeaders,
} from '../../src/contract/webhook-signature.ts';
import { WebhookVerificationError, verifyWebhook } from '../../src/sdk/webhook-verify.ts';

// Fixed vector. The non-ASCII secret shows the key is the secret's UTF-8 bytes (wire-contract §9).
const SECRET = 'whk_test_secret-ü';
const BODY =
  '{"trade_id":"3fc51610-3dd9-409f-b531-38f78de8ca8a","status":"accepted","timestamp":1714445421123}';
const ID = '5b1c1d8e-0c36-4b8e-9c41-7f6a2f0e9a10';
const TS_MS = 1714445421123;
const EXPECTED = {
  svc: 'e9090789d186f8a3691cf0c49397e020643809ed203d511b5b56ea4c540faac0',
  svc256: '88d89d503c45e1b3798c0fc69c0a3395ebec00da8152c7787cf0f8394dde0ab4',
  standard: 'v1,NwFwvTUOuY2AyhRbojMeJnAvCQ71EWfawfhUDiFVXQo=',
  whsec: 'whsec_d2hrX3Rlc3Rfc2VjcmV0LcO8',
};

function hmac(data: string, encoding: 'hex' | 'base64'): string {
  return createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(data, 'utf8').digest(encoding);
}

function delivery(
  overrides: { body?: string; timestampMs?: number; secret?: string } = {},
): Record<string, string> {
  return webhookDeliveryHeaders({
    payloadType: 'trade_status_changed',
    notificationId: ID,
    timestampMs: overrides.timestampMs ?? TS_MS,
    rawBody: overrides.body ?? BODY,
    secret: overrides.secret ?? SECRET,
  });
}

const at = (ms: number) => () => ms;

function rejects(fn: () => unknown, reason: WebhookVerificationError['reason']): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(
      err instanceof WebhookVerificationError,
      `expected WebhookVerificationError, got ${String(err)}`,
    );
    assert.equal(err.reason, reason);
    return true;
  });
}

describe('signWebhook: wire-contract §5 fixed vector', () => {
  test('matches values computed independently with node:crypto', () => {
    // The independent computation: exactly the formulas of wire-contract §5.
    assert.equal(hmac(BODY + String(TS_MS), 'hex'), EXPECTED.svc);
    assert.equal(hmac(BODY, 'hex'), EXPECTED.svc256);
    assert.equal(`v1,${hmac(`${ID}.${Math.floor(TS_MS / 1000)}.${BODY}`, 'base64')}`, EXPECTED.standard);

    assert.deepEqual(signWebhook({ secret: SECRET, rawBody: BODY, notificationId: ID, timestampMs: TS_MS }), {
      [HOOK_SIGNATURE_HEADER]: EXPECTED.svc,
      [HOOK_SIGNATURE_256_HEADER]: EXPECTED.svc256,
      [STANDARD_WEBHOOK_ID_HEADER]: ID,
      [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: '1714445421',
      [STANDARD_WEBHOOK_SIGNATURE_HEADER]: EXPECTED.standard,
    });
  });

  test('a Buffer body signs like the same string', () => {
    const fromBuffer = signWebhook({
      secret: SECRET,
      rawBody: Buffer.from(BODY, 'utf8'),
      notificationId: ID,
      timestampMs: TS_MS,
    });
    assert.equal(fromBuffer[HOOK_SIGNATURE_HEADER], EXPECTED.svc);
    assert.equal(fromBuffer[STANDARD_WEBHOOK_SIGNATURE_HEADER], EXPECTED.standard);
  });

  test('standardWebhooksSecret is whsec_ + base64(UTF-8 bytes)', () => {
    assert.equal(standardWebhooksSecret(SECRET), EXPECTED.whsec);
  });

  test('the standardwebhooks package signs the same and verifies our headers', (t) => {
    const wh = new Webhook(standardWebhooksSecret(SECRET));
    assert.equal(wh.sign(ID, new Date(TS_MS), BODY), EXPECTED.standard);
    // The library reads Date.now(); pin it to the vector's time instead of waiting or re-signing.
    t.mock.timers.enable({ apis: ['Date'], now: TS_MS + 2_000 });
    assert.deepEqual(wh.verify(BODY, delivery()), JSON.parse(BODY));
    assert.throws(() => wh.verify(BODY.replace('accepted', 'active'), delivery()), /No matching signature/);
  });

  test('the standardwebhooks package verifies a delivery signed now', () => {
    const body = JSON.stringify({ participant_code: 'ABC123', participant_status: 'approved', timestamp: 1 });
    const headers = delivery({ body, timestampMs: Date.now() });
    assert.deepEqual(new Webhook(standardWebhooksSecret(SECRET)).verify(body, headers), JSON.parse(body));
  });

  test('an empty secret is refused rather than signing with an empty key', () => {
    assert.throws(
      () => signWebhook({ secret: '', rawBody: BODY, notificationId: ID, timestampMs: TS_MS }),
      TypeError,
    );
  });

  test('without a secret the delivery carries no signature headers', () => {
    const headers = webhookDeliveryHeaders({
      payloadType: 'account_balance.changed',
      notificationId: ID,
      timestampMs: TS_MS,
      rawBody: BODY,
    });
    assert.deepEqual(headers, {
      'content-type': 'application/json',
      [HOOK_PAYLOAD_TYPE_HEADER]: 'account_balance.changed',
      [HOOK_NOTIFICATION_ID_HEADER]: ID,
      [HOOK_TIMESTAMP_HEADER]: String(TS_MS),
      [STANDARD_WEBHOOK_ID_HEADER]: ID,
      [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: '1714445421',
    });
    rejects(() => verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS) }), 'missing_header');
  });

  test('payload types are the closed list of wire-contract §5', () => {
    assert.deepEqual(
      [...WEBHOOK_PAYLOAD_TYPES],
      [
        'trade_status_changed',
        'account_balance.changed',
        'deposit_fund_complete',
        'customer_account_status_changed',
        'participant_status_changed',
      ],
    );
    assert.ok(isWebhookPayloadType('deposit_fund_complete'));
    assert.ok(!isWebhookPayloadType('trade.status_changed'));
  });
});

describe('verifyWebhook', () => {
  const only = (headers: Record<string, string>, drop: string[]) =>
    Object.fromEntries(Object.entries(headers).filter(([k]) => !drop.includes(k)));
  const SVC_ONLY = [
    STANDARD_WEBHOOK_ID_HEADER,
    STANDARD_WEBHOOK_TIMESTAMP_HEADER,
    STANDARD_WEBHOOK_SIGNATURE_HEADER,
  ];
  const STANDARD_ONLY = [HOOK_SIGNATURE_HEADER, HOOK_SIGNATURE_256_HEADER, HOOK_TIMESTAMP_HEADER];

  test('round trip with all headers: exact ms timestamp, signed id, parsed payload', () => {
    const event = verifyWebhook(BODY, delivery(), SECRET, { now: at(TS_MS + 1000) });
    assert.deepEqual(event, {
      payloadType: 'trade_status_changed',
      notificationId: ID,
      notificationIdSigned: true,
      timestamp: TS_MS,
      payload: JSON.parse(BODY),
    });
  });

  test('x-svc-hook-signature alone is enough', () => {
    const event = verifyWebhook(BODY, only(delivery(), SVC_ONLY), SECRET, { now: at(TS_MS) });
    assert.equal(event.notificationId, ID);
    assert.equal(event.timestamp, TS_MS);
  });

  test('Standard Webhooks headers alone are enough (timestamp in whole seconds)', () => {
    const event = verifyWebhook(BODY, only(delivery(), STANDARD_ONLY), SECRET, { now: at(TS_MS) });
    assert.equal(event.notificationId, ID);
    assert.equal(event.timestamp, 1714445421000);
  });

  test('accepts a fetch Headers object, a Buffer body and mixed-case header names', () => {
    const upper = Object.fromEntries(Object.entries(delivery()).map(([k, v]) => [k.toUpperCase(), v]));
    assert.equal(verifyWebhook(Buffer.from(BODY), upper, SECRET, { now: at(TS_MS) }).notificationId, ID);
    assert.equal(verifyWebhook(BODY, new Headers(delivery()), SECRET, { now: at(TS_MS) }).timestamp, TS_MS);
  });

  test('one matching entry among several webhook-signature entries is enough (key rotation)', () => {
    const headers = only(delivery(), STANDARD_ONLY);
    headers[STANDARD_WEBHOOK_SIGNATURE_HEADER] = `v1,${'A'.repeat(43)}= ${EXPECTED.standard} v2,whatever`;
    assert.equal(verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS) }).notificationId, ID);
  });

  for (const [scheme, drop] of [
    ['both schemes', []],
    ['x-svc-hook only', SVC_ONLY],
    ['Standard Webhooks only', STANDARD_ONLY],
  ] as const) {
    test(`${scheme}: tampered body is rejected`, () => {
      const tampered = BODY.replace('accepted', 'terminated');
      rejects(
        () => verifyWebhook(tampered, only(delivery(), [...drop]), SECRET, { now: at(TS_MS) }),
        'invalid_signature',
      );
    });

    test(`${scheme}: wrong secret is rejected`, () => {
      rejects(
        () => verifyWebhook(BODY, only(delivery(), [...drop]), `${SECRET}x`, { now: at(TS_MS) }),
        'invalid_signature',
      );
    });

    test(`${scheme}: stale and future timestamps are rejected, the tolerance edge is accepted`, () => {
      const headers = only(delivery(), [...drop]);
      const tolerance = 5 * 60 * 1000;
      const signedAt = drop === STANDARD_ONLY ? 1714445421000 : TS_MS;
      assert.equal(
        verifyWebhook(BODY, headers, SECRET, { now: at(signedAt + tolerance) }).notificationId,
        ID,
      );
      assert.equal(
        verifyWebhook(BODY, headers, SECRET, { now: at(signedAt - tolerance) }).notificationId,
        ID,
      );
      rejects(
        () => verifyWebhook(BODY, headers, SECRET, { now: at(signedAt + tolerance + 1) }),
        'timestamp_out_of_tolerance',
      );
      rejects(
        () => verifyWebhook(BODY, headers, SECRET, { now: at(signedAt - tolerance - 1) }),
        'timestamp_out_of_tolerance',
      );
      rejects(
        () => verifyWebhook(BODY, headers, SECRET, { now: at(signedAt + 1001), toleranceMs: 1000 }),
        'timestamp_out_of_tolerance',
      );
    });
  }

  test('a replay with a fresh x-svc-hook-timestamp does not verify', () => {
    const headers = only(delivery(), SVC_ONLY);
    headers[HOOK_TIMESTAMP_HEADER] = String(TS_MS + 600_000);
    rejects(() => verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS + 600_000) }), 'invalid_signature');
  });

  test('a swapped notification id is caught when both schemes are present', () => {
    const headers = { ...delivery(), [HOOK_NOTIFICATION_ID_HEADER]: '00000000-0000-4000-8000-000000000000' };
    rejects(() => verifyWebhook(BODY, headers, SECRET, { now: at(TS_MS) }), 'header_mismatch');
    const swappedStandardId = {
      ...delivery(),
      [STANDARD_WEBHOOK_ID_HEADER]: '00000000-0000-4000-8000-000000000000',
    };
    rejects(() => verifyWebhook(BODY, swappedStandardId, SECRET, { now: at(TS_MS) }), 'invalid_signature');
  });

  test('missing and malformed headers', () => {
    const now = { now: at(TS_MS) };
    rejects(() => verifyWebhook(BODY, {}, SECRET, now), 'missing_header');
    // The legacy body-only signature binds no timestamp: not accepted on its own.
    rejects(
      () => verifyWebhook(BODY, only(delivery(), [...SVC_ONLY, HOOK_SIGNATURE_HEADER]), SECRET, now),
      'missing_header',
    );
    rejects(
      () => verifyWebhook(BODY, only(delivery(), [HOOK_PAYLOAD_TYPE_HEADER]), SECRET, now),
      'missing_header',
    );
    rejects(
      () => verifyWebhook(BODY, only(delivery(), [...SVC_ONLY, HOOK_TIMESTAMP_HEADER]), SECRET, now),
      'missing_header',
    );
    rejects(
      () => verifyWebhook(BODY, only(delivery(), [...SVC_ONLY, HOOK_NOTIFICATION_ID_HEADER]), SECRET, now),
      'missing_header',
    );
    rejects(
      () =>
        verifyWebhook(BODY, only(delivery(), [...STANDARD_ONLY, STANDARD_WEBHOOK_ID_HEADER]), SECRET, now),
      'missing_header',
    );
    rejects(
      () => verifyWebhook(BODY, { ...delivery(), [HOOK_TIMESTAMP_HEADER]: '1714445421123.5' }, SECRET, now),
      'malformed_header',
    );
    rejects(
      () => verifyWebhook(BODY, { ...delivery(), [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: '-1' }, SECRET, now),
      'malformed_header',
    );
    const repeated = { ...delivery(), [HOOK_SIGNATURE_HEADER]: [EXPECTED.svc, EXPECTED.svc] };
    rejects(() => verifyWebhook(BODY, repeated, SECRET, now), 'malformed_header');
  });

  test('a signed body that is not JSON is reported as such', () => {
    const body = 'not json';
    rejects(() => verifyWebhook(body, delivery({ body }), SECRET, { now: at(TS_MS) }), 'invalid_payload');
  });

  test('the raw bytes as a fetch Request gives them (ArrayBuffer) or as a Uint8Array view verify too', () => {
    const bytes = new TextEncoder().encode(BODY);
    // A view into a larger buffer: only its own bytes are the body.
    const padded = new Uint8Array(bytes.length + 8);
    padded.set(bytes, 4);
    for (const body of [bytes.buffer, bytes, padded.subarray(4, 4 + bytes.length)]) {
      const event = verifyWebhook(body, delivery(), SECRET, { now: at(TS_MS) });
      assert.equal(event.notificationId, delivery()['x-svc-hook-notification-id']);
    }
  });

  test('a parsed object is refused: its re-serialisation is not the signed bytes', () => {
    assert.throws(
      () => verifyWebhook(JSON.parse(BODY) as unknown as string, delivery(), SECRET, { now: at(TS_MS) }),
      TypeError,
    );
  });
});
