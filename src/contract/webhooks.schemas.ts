import { Type, type Static } from 'typebox';
import { GENERATED_CODE_PATTERN } from './identifiers.ts';
import { PageParam } from './responses.ts';
import { WEBHOOK_PAYLOAD_TYPES } from './webhook-headers.ts';
import { NOTIFICATION_STATUS_VALUES } from './wire-values.ts';

/**
 * Operator API for webhooks (DESIGN §3, issue 4 point 2): request and response shapes shared by the
 * server, the CLI and tests. Payload types and statuses are checked by the service rather than by enum
 * schemas, so that a 400 names the offending value and the allowed ones.
 */
const Code = Type.String({ pattern: GENERATED_CODE_PATTERN, description: '6-character platform code' });
const EpochMs = Type.Integer({ description: 'epoch milliseconds' });
const NullableEpochMs = Type.Union([EpochMs, Type.Null()]);

export type NotificationStatus = (typeof NOTIFICATION_STATUS_VALUES)[number];

export const WebhookPlatformParams = Type.Object({ code: Code });

/**
 * Longest webhook URL, as stored (the database check of migration 0002). The schema bounds the raw input;
 * the service also bounds the normalised form it stores, which can be longer (percent-encoding).
 */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

export const PutWebhookBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: MAX_WEBHOOK_URL_LENGTH,
      description: `absolute http(s) URL, at most ${MAX_WEBHOOK_URL_LENGTH} characters once normalised (percent-encoded)`,
    }),
    secret: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 1024 }), Type.Null()], {
        description: 'HMAC key (UTF-8). Omitted: keep the stored one; null: deliver unsigned',
      }),
    ),
    payload_types: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 100 }), { maxItems: 50 }), Type.Null()], {
        description: `a subset of ${WEBHOOK_PAYLOAD_TYPES.join(', ')}, at least one, each once; omitted or null: every type`,
      }),
    ),
    enabled: Type.Optional(Type.Boolean({ description: 'default true' })),
  },
  { additionalProperties: false },
);
export type PutWebhookBody = Static<typeof PutWebhookBody>;

/** `PATCH /admin/platforms/{code}/webhook`: the fields given change (at least one); the others stay. */
export const PatchWebhookBody = Type.Object(
  {
    ...PutWebhookBody.properties,
    url: Type.Optional(PutWebhookBody.properties.url),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type PatchWebhookBody = Static<typeof PatchWebhookBody>;

export const WebhookEndpoint = Type.Object({
  platform_code: Type.String(),
  url: Type.String(),
  secret_set: Type.Boolean({ description: 'deliveries are signed; the secret is never returned' }),
  payload_types: Type.Array(Type.String()),
  all_payload_types: Type.Boolean(),
  enabled: Type.Boolean(),
  created_at: EpochMs,
  updated_at: EpochMs,
});
export type WebhookEndpoint = Static<typeof WebhookEndpoint>;

export const WebhookAttempt = Type.Object({
  attempt_number: Type.Integer({ minimum: 1 }),
  attempted_at: EpochMs,
  duration_ms: Type.Integer({ minimum: 0 }),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  outcome: Type.String({ description: 'delivered, failed, gone (410) or aborted (worker stopping)' }),
});
export type WebhookAttempt = Static<typeof WebhookAttempt>;

export const WebhookNotification = Type.Object({
  notification_id: Type.String({ format: 'uuid' }),
  platform_code: Type.String(),
  payload_type: Type.String(),
  resource_key: Type.String(),
  status: Type.String({ description: NOTIFICATION_STATUS_VALUES.join(', ') }),
  status_reason: Type.Union([Type.String(), Type.Null()]),
  created_at: EpochMs,
  next_attempt_at: NullableEpochMs,
  last_attempt_at: NullableEpochMs,
  delivered_at: NullableEpochMs,
  dead_at: NullableEpochMs,
  attempt_count: Type.Integer({ minimum: 0 }),
  payload: Type.Object({}, { additionalProperties: true }),
  attempts: Type.Array(WebhookAttempt),
});
export type WebhookNotification = Static<typeof WebhookNotification>;

export const NotificationsQuery = Type.Object(
  {
    // The values said, as the service (not an enum) checks them (probe: a client generated from the document took
    // any text).
    status: Type.Optional(
      Type.String({ maxLength: 20, description: `one of ${NOTIFICATION_STATUS_VALUES.join(', ')}` }),
    ),
    payload_type: Type.Optional(
      Type.String({ maxLength: 100, description: `one of ${WEBHOOK_PAYLOAD_TYPES.join(', ')}` }),
    ),
    resource_key: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
    // Bounded so that the 400 for a page like 1e300 names `page` rather than failing as an OFFSET.
    page: Type.Optional(PageParam),
    page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  },
  { additionalProperties: false },
);
export type NotificationsQuery = Static<typeof NotificationsQuery>;

export const NotificationParams = Type.Object({ id: Type.String({ format: 'uuid' }) });

/** An epoch ms a JavaScript Date (and so a timestamp here) can hold: past it, named, not a database range error. */
const TimeAsked = (description: string) =>
  Type.Integer({ minimum: 0, maximum: 8_640_000_000_000_000, description });

export const RedeliverSinceBody = Type.Object(
  {
    since: TimeAsked('epoch ms: every notification recorded at or after it'),
    until: Type.Optional(TimeAsked('epoch ms: only those recorded before it (default: no end)')),
    status: Type.Optional(
      Type.Array(Type.String({ maxLength: 20 }), {
        minItems: 1,
        maxItems: 5,
        uniqueItems: true,
        description: `only notifications in these states, each one of ${NOTIFICATION_STATUS_VALUES.join(', ')} (default: every state)`,
      }),
    ),
    resume: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,19}-[0-9]{1,19}$',
        description:
          'the `resume` of an answer that was not `complete`: goes on where it stopped (give the same since, until and status)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type RedeliverSinceBody = Static<typeof RedeliverSinceBody>;

export const RedeliverSinceResult = Type.Object({
  redelivered: Type.Integer({ minimum: 0, description: 'how many this call redelivered' }),
  complete: Type.Boolean({
    description: 'false: the call stopped after its time (about 10 s); call again with `resume` for the rest',
  }),
  resume: Type.Optional(Type.String({ description: 'when not complete: where the next call goes on' })),
  interrupted: Type.Optional(
    Type.String({
      description:
        'why the call stopped before its time: a batch failed after others of the call had committed (call again with resume)',
    }),
  ),
});
export type RedeliverSinceResult = Static<typeof RedeliverSinceResult>;
