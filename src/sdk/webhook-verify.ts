/**
 * Receiver side of wire-contract §5 (issue 4, point 6): verify a webhook delivery before trusting it.
 * The signatures are recomputed with the same code the server signs with
 * (`src/contract/webhook-signature.ts`), so the two cannot drift apart.
 */
import {
  HOOK_NOTIFICATION_ID_HEADER,
  HOOK_PAYLOAD_TYPE_HEADER,
  HOOK_SIGNATURE_HEADER,
  HOOK_TIMESTAMP_HEADER,
  STANDARD_WEBHOOK_ID_HEADER,
  STANDARD_WEBHOOK_SIGNATURE_HEADER,
  STANDARD_WEBHOOK_TIMESTAMP_HEADER,
  readHeader,
  type HeaderSource,
} from '../contract/webhook-headers.ts';
import {
  signaturesEqual,
  standardWebhookSignature,
  svcHookSignature,
  webhookTimestampSeconds,
} from '../contract/webhook-signature.ts';

/** Default allowed distance between the delivery's timestamp and the receiver's clock (the Standard Webhooks value). */
export const DEFAULT_WEBHOOK_TOLERANCE_MS = 5 * 60 * 1000;

/** Why a delivery was refused; a closed set so receivers can map it to logs or metrics. */
export type WebhookVerificationReason =
  /** a required header is absent (no signature header at all also lands here). */
  | 'missing_header'
  /** a header is present but not in its wire format, or repeated. */
  | 'malformed_header'
  /** no signature matched: wrong secret, or body, timestamp or id altered. */
  | 'invalid_signature'
  /** the signed timestamp is further than `toleranceMs` from now: a replay or a badly skewed clock. */
  | 'timestamp_out_of_tolerance'
  /** both signature schemes are present but name a different notification or time. */
  | 'header_mismatch'
  /** the signature is valid but the body is not JSON. */
  | 'invalid_payload';

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookVerificationReason,
    message: string,
    /** The header the failure is about, when there is one. */
    readonly header?: string,
  ) {
    super(message);
  }
}

export interface VerifyWebhookOptions {
  /**
   * Maximum |now − timestamp| in ms; default {@link DEFAULT_WEBHOOK_TOLERANCE_MS} (5 min). `Infinity` turns the
   * timestamp check off, e.g. to re-verify a stored delivery later; replays are then not refused, so do not
   * use it for live traffic. NaN, a negative number or a non-number throws (a RangeError or TypeError) rather
   * than silently skipping the check.
   */
  toleranceMs?: number;
  /** Current epoch ms; injectable for tests. Default `Date.now`. */
  now?: () => number;
}

export interface VerifiedWebhook<TPayload = unknown> {
  /** `x-svc-hook-payload-type`; one of `WEBHOOK_PAYLOAD_TYPES` from this server version. Newer servers may add
   * types, so an unknown value is returned rather than refused (check it with `isWebhookPayloadType`).
   * No signature covers this header (wire-contract §5 signs the body, the timestamp and, for Standard Webhooks,
   * the id): someone replaying a signed delivery within the tolerance could change it. Route on it, but let each
   * handler check that the payload has the shape of its type (a trade has `trade_id`, a participant event
   * `participant_status`, …) rather than trust the header for what the body is. */
  payloadType: string;
  /** Stable across retries and redeliveries: de-duplicate on it (delivery is at least once). */
  notificationId: string;
  /**
   * Whether a signature covers `notificationId`: the Standard Webhooks one does (`webhook-id`), which this
   * service sends beside its own whenever a secret is set. With `x-svc-hook-signature` alone, the id is an
   * unsigned header: someone replaying a signed delivery within the tolerance could change it and get past
   * de-duplication (review). Refuse such deliveries, or de-duplicate them on the body too, when it matters.
   */
  notificationIdSigned: boolean;
  /** Epoch ms of the delivery attempt. */
  timestamp: number;
  /** The parsed JSON body. */
  payload: TPayload;
}

/**
 * Verifies a webhook delivery and returns its parsed content, or throws a
 * {@link WebhookVerificationError} with a `reason`.
 *
 * Accepted schemes (wire-contract §5): `x-svc-hook-signature` (hex HMAC over raw body + ms
 * timestamp, with `x-svc-hook-timestamp`), or the Standard Webhooks headers (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`). Either one alone is enough; when both are present both
 * must verify and agree on id and time, so a replay cannot swap the notification id that receivers
 * de-duplicate on. With `x-svc-hook-signature` alone the id is not signed (`notificationIdSigned` false).
 * The legacy `x-svc-hook-signature-256` is not
 * accepted on its own: it binds no timestamp, so it cannot stop replays.
 *
 * `rawBody` must be the exact bytes received, before any JSON parsing. `headers` may be Node's
 * `req.headers` or `req.headersDistinct`, a fetch `Headers`, or a plain record; several `webhook-signature`
 * values (an array) are one list, as Standard Webhooks allows, while a repeated `x-svc-hook-signature` is
 * refused as `malformed_header`.
 *
 * @example
 * // Fastify: keep the raw body (e.g. addContentTypeParser('application/json', { parseAs: 'string' }, …))
 * app.post('/hooks', async (req, reply) => {
 *   try {
 *     const event = verifyWebhook(req.body as string, req.headers, process.env.SVC_WEBHOOK_SECRET!);
 *     if (await alreadySeen(event.notificationId)) return reply.code(200).send();
 *     await handle(event.payloadType, event.payload);
 *     return reply.code(200).send();
 *   } catch (err) {
 *     if (err instanceof WebhookVerificationError) return reply.code(400).send({ error: err.reason });
 *     throw err;
 *   }
 * });
 */
export function verifyWebhook<TPayload = unknown>(
  rawBody: string | Uint8Array | ArrayBuffer,
  headers: HeaderSource,
  secret: string,
  options: VerifyWebhookOptions = {},
): VerifiedWebhook<TPayload> {
  // The bytes as a fetch Request gives them (`await request.arrayBuffer()`) are taken too.
  // By what the value is, not by `instanceof`: bytes made in another realm (a vm context, as some test runners
  // use) are of another ArrayBuffer and Uint8Array, and were refused as "not the raw body" (review).
  const body =
    typeof rawBody === 'string'
      ? rawBody
      : Object.prototype.toString.call(rawBody) === '[object ArrayBuffer]'
        ? Buffer.from(rawBody as ArrayBuffer)
        : ArrayBuffer.isView(rawBody)
          ? Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength)
          : null;
  if (body === null) {
    // A parsed object cannot be verified: re-serialising it does not give back the signed bytes.
    throw new TypeError(
      'verifyWebhook needs the raw body (a string, Buffer, Uint8Array or ArrayBuffer), not a parsed object',
    );
  }
  // Arguments of another type failed deep inside with a message naming none of them (review).
  if (headers === null || typeof headers !== 'object')
    throw new TypeError(
      'verifyWebhook needs the request headers (a plain object or a fetch Headers) as its second argument',
    );
  // A Buffer of the secret's bytes keys the HMACs alike (it always did): taken too.
  const given = secret as unknown;
  const secretLength =
    typeof given === 'string' ? given.length : ArrayBuffer.isView(given) ? given.byteLength : 0;
  if (secretLength === 0)
    throw new TypeError(
      "verifyWebhook needs the platform's webhook secret, a non-empty string, as its third argument",
    );
  const toleranceMs = checkTolerance(options.toleranceMs);
  const now = options.now ?? Date.now;

  const svcSignature = singleHeader(headers, HOOK_SIGNATURE_HEADER);
  // Node joins a repeated header with ", ", which no hex signature contains: ambiguous, not a forgery.
  if (svcSignature?.includes(',')) throw repeated(HOOK_SIGNATURE_HEADER);
  const standardSignature = signatureList(headers, STANDARD_WEBHOOK_SIGNATURE_HEADER);
  if (svcSignature === undefined && standardSignature === undefined) {
    throw new WebhookVerificationError(
      'missing_header',
      `no signature: expected ${HOOK_SIGNATURE_HEADER} or ${STANDARD_WEBHOOK_SIGNATURE_HEADER} (is a secret configured?)`,
      HOOK_SIGNATURE_HEADER,
    );
  }
  const payloadType = requiredHeader(headers, HOOK_PAYLOAD_TYPE_HEADER);

  let timestampMs: number | undefined;
  let notificationId: string | undefined;

  if (svcSignature !== undefined) {
    const ms = parseTimestamp(requiredHeader(headers, HOOK_TIMESTAMP_HEADER), HOOK_TIMESTAMP_HEADER);
    const expected = svcHookSignature(secret, body, ms);
    // wire-contract §5: lower-case hex; upper-case is accepted since hex case carries no meaning.
    if (!signaturesEqual(svcSignature.toLowerCase(), expected)) {
      throw new WebhookVerificationError(
        'invalid_signature',
        'signature does not match',
        HOOK_SIGNATURE_HEADER,
      );
    }
    timestampMs = ms;
    notificationId = singleHeader(headers, HOOK_NOTIFICATION_ID_HEADER);
  }

  if (standardSignature !== undefined) {
    const id = requiredHeader(headers, STANDARD_WEBHOOK_ID_HEADER);
    const seconds = parseTimestamp(
      requiredHeader(headers, STANDARD_WEBHOOK_TIMESTAMP_HEADER),
      STANDARD_WEBHOOK_TIMESTAMP_HEADER,
    );
    const expected = standardWebhookSignature(secret, id, seconds, body);
    // Standard Webhooks: several space-separated `v1,<sig>` entries may be sent (key rotation); one match is
    // enough. A header sent more than once arrives joined with ", " (Node's req.headers): that separator too.
    const matched = standardSignature
      .split(/,?\s+/)
      .some((entry) => entry.startsWith('v1,') && signaturesEqual(entry.slice(3), expected));
    if (!matched) {
      throw new WebhookVerificationError(
        'invalid_signature',
        'signature does not match',
        STANDARD_WEBHOOK_SIGNATURE_HEADER,
      );
    }
    if (timestampMs !== undefined && webhookTimestampSeconds(timestampMs) !== seconds) {
      throw new WebhookVerificationError(
        'header_mismatch',
        `${HOOK_TIMESTAMP_HEADER} and ${STANDARD_WEBHOOK_TIMESTAMP_HEADER} disagree`,
        STANDARD_WEBHOOK_TIMESTAMP_HEADER,
      );
    }
    if (notificationId !== undefined && notificationId !== id) {
      throw new WebhookVerificationError(
        'header_mismatch',
        `${HOOK_NOTIFICATION_ID_HEADER} and ${STANDARD_WEBHOOK_ID_HEADER} disagree`,
        HOOK_NOTIFICATION_ID_HEADER,
      );
    }
    // The signed id and, when present, the exact milliseconds of our own header.
    notificationId = id;
    timestampMs ??= seconds * 1000;
  }

  if (notificationId === undefined) {
    notificationId = requiredHeader(headers, HOOK_NOTIFICATION_ID_HEADER);
  }
  // Both branches above set it when their signature is present, and one of them is.
  const timestamp = timestampMs as number;

  // Checked after the signature so that a forged message reports the forgery, not its age.
  const nowMs = now();
  if (!Number.isFinite(nowMs))
    throw new TypeError(`verifyWebhook: options.now must return epoch ms, got ${String(nowMs)}`);
  const skew = nowMs - timestamp;
  if (Math.abs(skew) > toleranceMs) {
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      `timestamp is ${Math.round(Math.abs(skew) / 1000)} s in the ${skew > 0 ? 'past' : 'future'}; tolerance ${toleranceMs} ms`,
    );
  }

  let payload: TPayload;
  try {
    payload = JSON.parse(typeof body === 'string' ? body : body.toString('utf8')) as TPayload;
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'body is not valid JSON');
  }
  return {
    payloadType,
    notificationId,
    notificationIdSigned: standardSignature !== undefined,
    timestamp,
    payload,
  };
}

/** `toleranceMs` as given, or the default; refused when it would silently turn the check off. */
function checkTolerance(value: unknown): number {
  if (value === undefined) return DEFAULT_WEBHOOK_TOLERANCE_MS;
  if (typeof value !== 'number') {
    throw new TypeError(`verifyWebhook: options.toleranceMs must be a number of ms, got ${typeof value}`);
  }
  // NaN would make every comparison false, i.e. accept any timestamp; Infinity does that on purpose.
  if (Number.isNaN(value) || value < 0) {
    throw new RangeError(
      `verifyWebhook: options.toleranceMs must be a non-negative number of ms (or Infinity for no check), got ${value}`,
    );
  }
  return value;
}

const repeated = (name: string) =>
  new WebhookVerificationError('malformed_header', `${name} is repeated`, name);

/** One value or nothing; an empty value counts as absent, a repeated header is refused as ambiguous. */
function singleHeader(headers: HeaderSource, name: string): string | undefined {
  const value = readHeader(headers, name);
  if (value === undefined) return undefined;
  if (typeof value !== 'string') {
    if (value.length === 0) return undefined;
    if (value.length > 1) throw repeated(name);
    return value[0] === '' ? undefined : value[0];
  }
  return value === '' ? undefined : value;
}

/**
 * `webhook-signature`, whose value is a space-separated list (Standard Webhooks), so several header values
 * (Node's `headersDistinct`, hand-built records) are one list: joined with a space. Empty counts as absent.
 */
function signatureList(headers: HeaderSource, name: string): string | undefined {
  const value = readHeader(headers, name);
  const joined = typeof value === 'string' ? value : value?.filter((v) => v !== '').join(' ');
  return joined === '' ? undefined : joined;
}

function requiredHeader(headers: HeaderSource, name: string): string {
  const value = singleHeader(headers, name);
  if (value === undefined) throw new WebhookVerificationError('missing_header', `${name} is missing`, name);
  return value;
}

function parseTimestamp(value: string, name: string): number {
  const parsed = /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(parsed)) {
    throw new WebhookVerificationError('malformed_header', `${name} is not an integer timestamp`, name);
  }
  return parsed;
}
