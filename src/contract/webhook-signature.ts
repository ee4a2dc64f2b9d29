/**
 * Webhook signing of wire-contract §5, the single implementation used by the server's delivery
 * worker (to sign) and by the SDK's `verifyWebhook` (to recompute and compare).
 *
 * wire-contract §9: for all three signatures the HMAC key is the UTF-8 bytes of the configured
 * secret; a Standard Webhooks library verifies with `whsec_` + base64 of those bytes
 * ({@link standardWebhooksSecret}).
 */
import { createHmac, timingSafeEqual, type Hmac } from 'node:crypto';

import {
  HOOK_NOTIFICATION_ID_HEADER,
  HOOK_PAYLOAD_TYPE_HEADER,
  HOOK_SIGNATURE_256_HEADER,
  HOOK_SIGNATURE_HEADER,
  HOOK_TIMESTAMP_HEADER,
  STANDARD_WEBHOOK_ID_HEADER,
  STANDARD_WEBHOOK_SECRET_PREFIX,
  STANDARD_WEBHOOK_SIGNATURE_HEADER,
  STANDARD_WEBHOOK_TIMESTAMP_HEADER,
  type WebhookPayloadType,
} from './webhook-headers.ts';

/** The raw body exactly as sent on the wire: the signatures cover these bytes, not a re-serialisation. */
export type RawBody = string | Uint8Array;

function hmac(secret: string): Hmac {
  // wire-contract §9: an empty key would make every signature forgeable and Standard Webhooks
  // libraries refuse it, so an empty secret is a configuration error, not "unsigned".
  if (secret.length === 0) throw new TypeError('webhook secret must not be empty');
  // A string key is used as its UTF-8 bytes.
  return createHmac('sha256', secret);
}

/** Standard Webhooks carries seconds; our own header carries the exact milliseconds. */
export function webhookTimestampSeconds(timestampMs: number): number {
  return Math.floor(timestampMs / 1000);
}

function assertTimestampMs(timestampMs: number): void {
  if (!Number.isSafeInteger(timestampMs) || timestampMs < 0) {
    throw new RangeError(`webhook timestamp must be a non-negative integer of epoch ms, got ${timestampMs}`);
  }
}

/** wire-contract §5 `x-svc-hook-signature`: lower-case hex HMAC-SHA256(secret, raw_body + timestamp). */
export function svcHookSignature(secret: string, rawBody: RawBody, timestampMs: number): string {
  assertTimestampMs(timestampMs);
  // The timestamp is appended as the same decimal string that travels in x-svc-hook-timestamp.
  return hmac(secret).update(rawBody).update(String(timestampMs), 'utf8').digest('hex');
}

/** wire-contract §5 `x-svc-hook-signature-256` (legacy): lower-case hex HMAC-SHA256(secret, raw_body). */
export function svcHookBodySignature(secret: string, rawBody: RawBody): string {
  return hmac(secret).update(rawBody).digest('hex');
}

/**
 * Standard Webhooks signature value without the `v1,` prefix: base64 HMAC-SHA256 over
 * `${id}.${timestampSeconds}.${body}`.
 */
export function standardWebhookSignature(
  secret: string,
  notificationId: string,
  timestampSeconds: number,
  rawBody: RawBody,
): string {
  return hmac(secret)
    .update(`${notificationId}.${timestampSeconds}.`, 'utf8')
    .update(rawBody)
    .digest('base64');
}

/**
 * The secret in the form a Standard Webhooks library takes: `whsec_` + base64(UTF-8 bytes of secret).
 *
 * @example
 * import { Webhook } from 'standardwebhooks';
 * new Webhook(standardWebhooksSecret(secret)).verify(rawBody, headers);
 */
export function standardWebhooksSecret(secret: string): string {
  return STANDARD_WEBHOOK_SECRET_PREFIX + Buffer.from(secret, 'utf8').toString('base64');
}

export interface SignWebhookInput {
  secret: string;
  rawBody: RawBody;
  /** UUID of the notification, stable across retries and redeliveries (becomes `webhook-id`). */
  notificationId: string;
  /** Epoch ms of this attempt. */
  timestampMs: number;
}

/** The five headers that carry the signatures and what they bind (lower-case names). */
export interface WebhookSignatureHeaders {
  [HOOK_SIGNATURE_HEADER]: string;
  [HOOK_SIGNATURE_256_HEADER]: string;
  [STANDARD_WEBHOOK_ID_HEADER]: string;
  [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: string;
  [STANDARD_WEBHOOK_SIGNATURE_HEADER]: string;
}

/**
 * Signs one delivery attempt (wire-contract §5). Only for platforms with a secret; for the complete
 * header set of a delivery, with or without a secret, use {@link webhookDeliveryHeaders}.
 *
 * @example
 * const headers = signWebhook({ secret, rawBody, notificationId, timestampMs: clock.now() });
 * // headers['x-svc-hook-signature'], headers['webhook-signature'] === 'v1,…', …
 */
export function signWebhook(input: SignWebhookInput): WebhookSignatureHeaders & Record<string, string> {
  const { secret, rawBody, notificationId, timestampMs } = input;
  const seconds = webhookTimestampSeconds(timestampMs);
  return {
    [HOOK_SIGNATURE_HEADER]: svcHookSignature(secret, rawBody, timestampMs),
    [HOOK_SIGNATURE_256_HEADER]: svcHookBodySignature(secret, rawBody),
    [STANDARD_WEBHOOK_ID_HEADER]: notificationId,
    [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: String(seconds),
    [STANDARD_WEBHOOK_SIGNATURE_HEADER]: `v1,${standardWebhookSignature(secret, notificationId, seconds, rawBody)}`,
  };
}

export interface WebhookDeliveryHeadersInput {
  payloadType: WebhookPayloadType;
  notificationId: string;
  timestampMs: number;
  rawBody: RawBody;
  /** The platform's configured secret; `undefined`/`null` = no secret configured. */
  secret?: string | null;
}

/**
 * Every header of one delivery attempt (wire-contract §5), for the delivery worker. Without a secret
 * the signature headers are left out ("only with a secret"); `webhook-id` and `webhook-timestamp`
 * are still sent, since receivers use them to de-duplicate.
 *
 * @example
 * const rawBody = JSON.stringify(payload);
 * await request(url, { method: 'POST', body: rawBody,
 *   headers: webhookDeliveryHeaders({ payloadType, notificationId, timestampMs: clock.now(), rawBody, secret }) });
 */
export function webhookDeliveryHeaders(input: WebhookDeliveryHeadersInput): Record<string, string> {
  const { payloadType, notificationId, timestampMs, rawBody, secret } = input;
  assertTimestampMs(timestampMs);
  // One object literal, no spreads: this runs for every attempt, and building it from signWebhook's result
  // by spreading doubled its cost (bench/webhooks.bench.ts profiles).
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    [HOOK_PAYLOAD_TYPE_HEADER]: payloadType,
    [HOOK_NOTIFICATION_ID_HEADER]: notificationId,
    [HOOK_TIMESTAMP_HEADER]: String(timestampMs),
    [STANDARD_WEBHOOK_ID_HEADER]: notificationId,
    [STANDARD_WEBHOOK_TIMESTAMP_HEADER]: String(webhookTimestampSeconds(timestampMs)),
  };
  if (secret === undefined || secret === null) return headers;
  const signatures = signWebhook({ secret, rawBody, notificationId, timestampMs });
  headers[HOOK_SIGNATURE_HEADER] = signatures[HOOK_SIGNATURE_HEADER];
  headers[HOOK_SIGNATURE_256_HEADER] = signatures[HOOK_SIGNATURE_256_HEADER];
  headers[STANDARD_WEBHOOK_SIGNATURE_HEADER] = signatures[STANDARD_WEBHOOK_SIGNATURE_HEADER];
  return headers;
}

/**
 * Constant-time comparison of two signature strings (wire-contract §1 and §5: compare in constant
 * time). Lengths are public (fixed by the algorithm), so an early return on a length mismatch leaks
 * nothing about the secret.
 */
export function signaturesEqual(received: string, expected: string): boolean {
  const a = Buffer.from(received, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
