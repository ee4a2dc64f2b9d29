import { Type, type Static } from 'typebox';
import { AccountLabel, PageParam } from './responses.ts';
import { ParticipantCodeRef, TenantCode, ZRN_PATTERN } from './identifiers.ts';
import { ACCOUNT_TIERS, ACCOUNT_TYPES, BALANCE_ACCOUNT_TYPES, REGIONS } from './wire-values.ts';

/**
 * Customer accounts, tenants and balance accounts on the wire (issue 5; spec 2.1, 4.1, 4.2; wire-contract
 * §3, §4). Field names and shapes are the vendor's (AccountsResponseEntity, GetAccountsResponse,
 * CustomerAccountResponse, PostCustomerAccountRequest, AddTenantToCustomerAccountBody).
 */

const Zrn = Type.String({
  pattern: ZRN_PATTERN,
  description: 'customer account resource name, zrn:svc:<region>:account:customer:<uuid>',
});

export const ZrnParams = Type.Object({ zrn: Zrn });
export type ZrnParams = Static<typeof ZrnParams>;

export const TenantParams = Type.Object({ zrn: Zrn, tenant: TenantCode });
export type TenantParams = Static<typeof TenantParams>;

/** AddTenantToCustomerAccountBody. */
export const AddTenantBody = Type.Object(
  { participant_code: ParticipantCodeRef },
  { additionalProperties: false },
);
export type AddTenantBody = Static<typeof AddTenantBody>;

export const PendingTenantChange = Type.Object({
  participant_code: Type.String(),
  change: Type.Union([Type.Literal('add'), Type.Literal('remove')]),
  /** When the change was accepted (202), epoch ms. */
  accepted_at: Type.Integer(),
});
export type PendingTenantChange = Static<typeof PendingTenantChange>;

/** The value of `include` that asks GET /accounts/{zrn}/details for the pending tenant changes. */
export const INCLUDE_PENDING_TENANT_CHANGES = 'pending_tenant_changes';

/**
 * The vendor's CustomerAccountResponse.message (GET /accounts/{zrn}/details), and, when the request asks for it
 * (`include=pending_tenant_changes`), `pending_tenant_changes`: accepted tenant changes that have not taken effect
 * yet, oldest first (spec 3.2: `tenants` is the set in effect; a 202 only means accepted). Asked for, not given
 * always: a client generated from the vendor's document with strict models refuses an answer with a field it
 * does not define (probe). The account notification's payload is the object without it.
 */
export const CustomerAccountDetails = Type.Object({
  zrn: Type.String(),
  participant_code: Type.String(),
  platform_code: Type.String(),
  prefunded: Type.Boolean(),
  account_label: Type.String(),
  account_group: Type.String(),
  type: Type.String(),
  tier: Type.Optional(Type.String()),
  status: Type.String(),
  tenants: Type.Array(Type.String()),
  financial_advisors: Type.Array(Type.String()),
  pending_tenant_changes: Type.Optional(Type.Array(PendingTenantChange)),
});
export type CustomerAccountDetails = Static<typeof CustomerAccountDetails>;
/** The details as asked for with `include=pending_tenant_changes` (the SDK always asks). */
export type CustomerAccountDetailsWithPending = CustomerAccountDetails & {
  pending_tenant_changes: PendingTenantChange[];
};

/**
 * GET /accounts/{zrn}/details query, our extensions: `participant_code` reads the account as that
 * participant: the holder and the tenants in effect get the details, a former tenant gets 403 (issue 5:
 * tenants act as the primary holder); `include=pending_tenant_changes` adds the pending tenant changes.
 */
export const DetailsQuery = Type.Object(
  {
    participant_code: Type.Optional(ParticipantCodeRef),
    include: Type.Optional(
      Type.Literal(INCLUDE_PENDING_TENANT_CHANGES, {
        description:
          'adds pending_tenant_changes, the accepted tenant changes not in effect yet (our extension)',
      }),
    ),
  },
  // A misspelt parameter is refused rather than ignored, as on every list (below).
  { additionalProperties: false },
);
export type DetailsQuery = Static<typeof DetailsQuery>;

/** PostCustomerAccountRequest ("Customer Account - All Fields"), plus our optional `region` of the zrn. */
export const CreateCustomerAccountRequest = Type.Object(
  {
    participant_code: ParticipantCodeRef,
    account_label: AccountLabel,
    type: Type.Enum(ACCOUNT_TYPES),
    tier: Type.Enum(ACCOUNT_TIERS),
    prefunded: Type.Optional(Type.Boolean({ default: true })),
    tenants: Type.Optional(Type.Array(ParticipantCodeRef, { maxItems: 100, uniqueItems: true })),
    financial_advisors: Type.Optional(Type.Array(ParticipantCodeRef, { maxItems: 100, uniqueItems: true })),
    region: Type.Optional(Type.Enum(REGIONS)),
  },
  { additionalProperties: false },
);
export type CreateCustomerAccountRequest = Static<typeof CreateCustomerAccountRequest>;

/**
 * GET /accounts query: the vendor's filters and page (query strings are coerced). Any other parameter is refused
 * (400 "<name>: is not allowed"), as on GET /trades: ignored, a misspelt filter (`acount_owner`) answered every
 * balance of the platform (review).
 */
export const ListAccountsQuery = Type.Object(
  {
    page: Type.Optional(PageParam),
    page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
    account_group: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    // A filter: a longer label than any account's only matches nothing.
    account_label: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    /** The vendor: "mirrors a participant_code". With account_label, a tenant reads as the holder. */
    account_owner: Type.Optional(ParticipantCodeRef),
    asset: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    account_type: Type.Optional(Type.Enum(BALANCE_ACCOUNT_TYPES)),
  },
  { additionalProperties: false },
);
export type ListAccountsQuery = Static<typeof ListAccountsQuery>;

/** AccountsResponseEntity: one balance of the ledger. */
export const BalanceAccount = Type.Object({
  asset: Type.String(),
  account_owner: Type.String(),
  account_type: Type.String(),
  account_group: Type.String(),
  account_label: Type.String(),
  /** decimal string */
  balance: Type.String(),
  account_id: Type.String({ format: 'uuid' }),
  /** epoch ms of the last balance change */
  last_update: Type.Integer(),
});
export type BalanceAccount = Static<typeof BalanceAccount>;

/** GetAccountsResponse: wire-contract §3, with the vendor's page and total_pages only. */
export const ListAccountsResponse = Type.Object({
  message: Type.Array(BalanceAccount),
  page: Type.Integer({ minimum: 1 }),
  total_pages: Type.Integer({ minimum: 0 }),
});
export type ListAccountsResponse = Static<typeof ListAccountsResponse>;
