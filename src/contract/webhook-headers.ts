/**
 * Wire names of outgoing webhook deliveries (wire-contract §5), shared by the server's delivery
 * worker, the SDK's verifier and the CLI's local receiver, so that none of them spells a header or a
 * payload type on its own.
 */

/** wire-contract §5: the payload-type header; its values are {@link WEBHOOK_PAYLOAD_TYPES}. */
export const HOOK_PAYLOAD_TYPE_HEADER = 'x-svc-hook-payload-type';
/** wire-contract §5: UUID, the same on every retry and manual redelivery of one notification. */
export const HOOK_NOTIFICATION_ID_HEADER = 'x-svc-hook-notification-id';
/** wire-contract §5: epoch milliseconds of this attempt (a decimal string). */
export const HOOK_TIMESTAMP_HEADER = 'x-svc-hook-timestamp';
/** wire-contract §5: lower-case hex HMAC-SHA256(secret, raw_body + timestamp); only with a secret. */
export const HOOK_SIGNATURE_HEADER = 'x-svc-hook-signature';
/** wire-contract §5: lower-case hex HMAC-SHA256(secret, raw_body); legacy, replayable, only with a secret. */
export const HOOK_SIGNATURE_256_HEADER = 'x-svc-hook-signature-256';

/** Standard Webhooks (wire-contract §5): the message id, equal to the notification id. */
export const STANDARD_WEBHOOK_ID_HEADER = 'webhook-id';
/** Standard Webhooks: Unix time in **seconds** (the Standard Webhooks spec), not milliseconds. */
export const STANDARD_WEBHOOK_TIMESTAMP_HEADER = 'webhook-timestamp';
/** Standard Webhooks: space-separated `v1,<base64 HMAC-SHA256>` entries. */
export const STANDARD_WEBHOOK_SIGNATURE_HEADER = 'webhook-signature';

/** Prefix that Standard Webhooks libraries expect in front of the base64 secret. */
export const STANDARD_WEBHOOK_SECRET_PREFIX = 'whsec_';

/**
 * wire-contract §5: the closed list of `x-svc-hook-payload-type` values. The first two are fixed by
 * spec part 6 rule 1; the others are the vendor's names for fund, account and participant events.
 */
export const WEBHOOK_PAYLOAD_TYPES = [
  'trade_status_changed',
  'account_balance.changed',
  'deposit_fund_complete',
  'customer_account_status_changed',
  'participant_status_changed',
] as const;

export type WebhookPayloadType = (typeof WEBHOOK_PAYLOAD_TYPES)[number];

const payloadTypeSet: ReadonlySet<string> = new Set(WEBHOOK_PAYLOAD_TYPES);

/** True when `value` is one of {@link WEBHOOK_PAYLOAD_TYPES}, e.g. to validate the operator's filter list. */
export function isWebhookPayloadType(value: unknown): value is WebhookPayloadType {
  return typeof value === 'string' && payloadTypeSet.has(value);
}

/** Headers as Node (`IncomingMessage.headers`, undici `request`) or fetch (`Headers`) hand them over. */
export type HeaderSource =
  Headers | Readonly<Record<string, string | readonly string[] | number | undefined>>;

function isFetchHeaders(headers: HeaderSource): headers is Headers {
  const candidate = headers as { get?: unknown; has?: unknown; forEach?: unknown };
  return (
    typeof candidate.get === 'function' &&
    typeof candidate.has === 'function' &&
    typeof candidate.forEach === 'function'
  );
}

/**
 * Reads one header by name, case-insensitively, from either header shape. Returns `undefined` when
 * absent, the value when present once, and every value when a Node record carries an array (the
 * caller decides whether several values are acceptable).
 */
export function readHeader(headers: HeaderSource, name: string): string | readonly string[] | undefined {
  const lower = name.toLowerCase();
  // Any fetch Headers, told by its shape: the undici package's class (and a polyfill's) is not the global one,
  // and read as a record it had no keys, so a valid delivery was refused as missing its signature.
  if (isFetchHeaders(headers)) return headers.get(lower) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | number | undefined>>;
  // Node lower-cases incoming header names, but hand-built records may not be.
  let value = record[lower];
  if (value === undefined) {
    for (const key of Object.keys(record)) {
      if (key.toLowerCase() === lower) {
        value = record[key];
        break;
      }
    }
  }
  return typeof value === 'number' ? String(value) : value;
}
