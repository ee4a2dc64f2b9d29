import { Type, type Static } from 'typebox';
import { DECIMAL_PATTERN, NON_NEGATIVE_DECIMAL_PATTERN } from '../lib/decimal.ts';
import { GeneratedCode as Code } from './identifiers.ts';
import {
  AccountLabel,
  NAME_TEXT,
  NAME_TEXT_PATTERN,
  PRINTABLE_TEXT,
  PRINTABLE_TEXT_PATTERN,
} from './responses.ts';
import { BALANCE_ACCOUNT_TYPES, PARTICIPANT_STATUS_VALUES, REGIONS } from './wire-values.ts';

/** Operator API (DESIGN §3) request and response shapes, shared by the server, the CLI and tests. */
// 64 characters covers every amount the 60-digit decimal arithmetic (src/lib/decimal.ts) keeps exactly, and
// keeps PostgreSQL's numeric limits out of reach (a 200,000-digit amount failed there as a 500).
const Decimal = Type.String({ pattern: DECIMAL_PATTERN, maxLength: 64, description: 'decimal string' });
const NonNegativeDecimal = Type.String({
  pattern: NON_NEGATIVE_DECIMAL_PATTERN,
  maxLength: 64,
  description: 'non-negative decimal string',
});

export const CreatePlatformBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200, pattern: NAME_TEXT_PATTERN, description: NAME_TEXT }),
    ip_allowlist: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1000 })),
    quote_expiry_ms: Type.Optional(Type.Integer({ minimum: 1000, maximum: 3_600_000 })),
    quote_expiry_requests: Type.Optional(
      Type.Boolean({
        description:
          "whether the platform's RFQs may ask for a quote_expiry window (5s … 15m) instead of quote_expiry_ms, as the vendor's per-platform feature flag; default true",
      }),
    ),
    deposit_fee_bps: Type.Optional(NonNegativeDecimal),
  },
  { additionalProperties: false },
);
export type CreatePlatformBody = Static<typeof CreatePlatformBody>;

/** `PATCH /admin/platforms/{code}`: the fields given change; `quote_expiry_ms: null` goes back to SVC_QUOTE_EXPIRY_MS. */
export const UpdatePlatformBody = Type.Object(
  {
    name: Type.Optional(CreatePlatformBody.properties.name),
    quote_expiry_ms: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1000, maximum: 3_600_000 }), Type.Null()]),
    ),
    quote_expiry_requests: CreatePlatformBody.properties.quote_expiry_requests,
    deposit_fee_bps: CreatePlatformBody.properties.deposit_fee_bps,
  },
  { additionalProperties: false },
);
export type UpdatePlatformBody = Static<typeof UpdatePlatformBody>;

export const Platform = Type.Object({
  platform_code: Type.String(),
  name: Type.String(),
  ip_allowlist: Type.Array(Type.String()),
  quote_expiry_ms: Type.Integer(),
  quote_expiry_default: Type.Boolean({
    description:
      'true: the platform has none of its own, and follows SVC_QUOTE_EXPIRY_MS (quote_expiry_ms is it now)',
  }),
  quote_expiry_requests: Type.Boolean({
    description:
      "whether the platform's RFQs may ask for a quote_expiry window; false: such a request is a 400",
  }),
  deposit_fee_bps: Type.String(),
  created_at: Type.Integer(),
});
export type Platform = Static<typeof Platform>;

/**
 * The body of an operator action that takes none (issue an API key, redeliver a notification): a bare POST, or `{}`.
 * Any field is refused by name, as on every other route, rather than ignored (review: `{"label":"ci"}` issued a key
 * without one). Goes with `bareBodyAsEmpty` (http/routes/optional-body.ts).
 */

export const PlatformCodeParams = Type.Object({ code: Code });

export const IssuedApiKey = Type.Object({
  api_key: Type.String(),
  api_secret: Type.String(),
  passphrase: Type.String(),
  platform_code: Type.String(),
  created_at: Type.Integer(),
});
export type IssuedApiKey = Static<typeof IssuedApiKey>;

export const ApiKeySummary = Type.Object({
  api_key: Type.String(),
  platform_code: Type.String(),
  created_at: Type.Integer(),
  revoked_at: Type.Union([Type.Integer(), Type.Null()]),
  last_used_at: Type.Union([Type.Integer(), Type.Null()], {
    description: 'epoch ms of the last request it authenticated, to the minute; null: none yet',
  }),
});

export const ApiKeyParams = Type.Object({
  api_key: Type.String({ pattern: '^[A-Za-z0-9_-]{1,100}$', description: 'an API key' }),
});

export const AllowlistBody = Type.Object(
  { cidrs: Type.Array(Type.String({ maxLength: 64 }), { maxItems: 1000 }) },
  { additionalProperties: false },
);
// An enum, not a union of literals: a bad value is then one error that lists the values (error-handler.ts).
const ParticipantStatus = Type.Enum(PARTICIPANT_STATUS_VALUES);

/** `GET /admin/participants?email=`: the participants of every platform with this email (any letter case). */
export const FindParticipantsQuery = Type.Object(
  { email: Type.String({ format: 'email', maxLength: 254 }) },
  { additionalProperties: false },
);

export const CreateParticipantBody = Type.Object(
  {
    platform_code: Code,
    email: Type.String({ format: 'email', maxLength: 254 }),
    // As a customer's own (POST /participants/customers/new): shown as the participant's name (probe: a blank one and
    // a right-to-left override were taken here).
    first_name: Type.String({
      minLength: 1,
      maxLength: 100,
      pattern: NAME_TEXT_PATTERN,
      description: NAME_TEXT,
    }),
    last_name: Type.String({
      minLength: 1,
      maxLength: 100,
      pattern: NAME_TEXT_PATTERN,
      description: NAME_TEXT,
    }),
    status: Type.Optional(ParticipantStatus),
  },
  { additionalProperties: false },
);
export type CreateParticipantBody = Static<typeof CreateParticipantBody>;

export const UpdateParticipantBody = Type.Object(
  {
    status: ParticipantStatus,
    /**
     * Left out: the stored reason stays while the status does, and goes with a status change (a reason for the
     * old status does not explain the new one); null removes it.
     */
    reason_code: Type.Optional(
      Type.Union([
        Type.String({
          minLength: 1,
          maxLength: 50,
          pattern: PRINTABLE_TEXT_PATTERN,
          description: PRINTABLE_TEXT,
        }),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
);

export const Participant = Type.Object({
  participant_code: Type.String(),
  platform_code: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  first_name: Type.Union([Type.String(), Type.Null()]),
  last_name: Type.Union([Type.String(), Type.Null()]),
  status: Type.String(),
  reason_code: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.Integer(),
  updated_at: Type.Integer(),
});
export type Participant = Static<typeof Participant>;

export const ParticipantParams = Type.Object({ code: Code });

export const CreateCustomerAccountBody = Type.Object(
  {
    platform_code: Code,
    participant_code: Code,
    region: Type.Optional(Type.Union(REGIONS.map((r) => Type.Literal(r)))),
    account_label: Type.Optional(AccountLabel),
  },
  { additionalProperties: false },
);
export type CreateCustomerAccountBody = Static<typeof CreateCustomerAccountBody>;

/** The most price pairs one call sets. */
export const MAX_PRICE_PAIRS = 1_000;
export const SetPricesBody = Type.Object(
  {
    // At most MAX_PRICE_PAIRS a call: 16,384 pairs passed PostgreSQL's bound on a statement's parameters, and the
    // call failed as a 502 every time it was repeated (probe).
    pairs: Type.Record(Type.String({ pattern: '^[A-Z0-9]{1,12}/[A-Z0-9]{1,12}$' }), Decimal, {
      minProperties: 1,
      maxProperties: MAX_PRICE_PAIRS,
    }),
  },
  { additionalProperties: false },
);

export const Price = Type.Object({ pair: Type.String(), price: Type.String(), updated_at: Type.Integer() });

export const AdjustBalanceBody = Type.Object(
  {
    participant_code: Code,
    // Up to 100, the bound before labels of new accounts, quotes and trades were limited to 40 (AccountLabel):
    // balances recorded under a longer label stay within the operator's reach.
    // Printable as everywhere else (a "\u202egeneral" balance was out of the public API's reach: review).
    account_label: Type.String({
      minLength: 1,
      maxLength: 100,
      pattern: PRINTABLE_TEXT_PATTERN,
      description: PRINTABLE_TEXT,
    }),
    // The ledger's asset, not a fund asset: a deposit of BTC.BTC is credited in USD (review: `--asset BTC.BTC` was
    // refused with "an asset, e.g. USD" alone).
    asset: Type.String({
      pattern: '^[A-Z0-9]{1,12}$',
      description:
        'a ledger asset in capitals and digits, up to 12 characters, without a network, e.g. USD or BTC (not BTC.BTC)',
    }),
    amount: Decimal,
    account_type: Type.Optional(Type.Union(BALANCE_ACCOUNT_TYPES.map((t) => Type.Literal(t)))),
  },
  { additionalProperties: false },
);

/** `GET /admin/balances`: a participant's balances, optionally of one label or asset. */
export const ListBalancesQuery = Type.Object(
  {
    participant_code: Code,
    account_label: Type.Optional(AdjustBalanceBody.properties.account_label),
    asset: Type.Optional(AdjustBalanceBody.properties.asset),
  },
  { additionalProperties: false },
);
export type ListBalancesQuery = Static<typeof ListBalancesQuery>;

/** A balance account as the operator's calls answer it. */
const BALANCE_ACCOUNT_FIELDS = {
  participant_code: Type.String(),
  account_group: Type.String(),
  account_label: Type.String(),
  account_type: Type.String(),
  asset: Type.String(),
  balance: Type.String(),
  account_id: Type.String(),
};

export const HeldBalance = Type.Object({
  ...BALANCE_ACCOUNT_FIELDS,
  promised: Type.String({
    description:
      'what unsettled trades will pay from this balance at settlement (available balances; else "0")',
  }),
  updated_at: Type.Integer({ description: 'epoch ms of the last movement' }),
});
export type HeldBalance = Static<typeof HeldBalance>;

export const BalanceAdjustment = Type.Object({
  ...BALANCE_ACCOUNT_FIELDS,
  movement_id: Type.String(),
  run_id: Type.String(),
});
