-- Issue 5: customer accounts created through the public API (asynchronously), tenants of customer
-- accounts and the tenant changes that are accepted now and applied later (spec 2.1, 3.2, 4.1, 4.2).

-- The vendor's customer account carries financial advisors (CustomerAccountResponse); they are kept as
-- given at creation.
alter table customer_accounts add column financial_advisors text[] not null default '{}';

-- POST /accounts is asynchronous (202): the accepted request is kept here, with the zrn it will get, until a
-- job creates the account. The vendor's idempotency key is (participant_code, account_label): a replay finds
-- this row instead of creating a second account, so the row is kept after it has been applied.
create table customer_account_requests (
  request_id uuid primary key,
  zrn text not null unique check (zrn ~ '^zrn:svc:(us|eu|uk|ww|bz|au):account:customer:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  region text not null check (region in ('us', 'eu', 'uk', 'ww', 'bz', 'au')),
  type text not null check (type in ('individual', 'business', 'jtic', 'jtwros', 'trust', 'utma')),
  tier text check (tier in ('lite', 'pro', 'bronze', 'silver', 'gold')),
  prefunded boolean not null,
  tenants text[] not null default '{}',
  financial_advisors text[] not null default '{}',
  accepted_at timestamptz not null,
  applied_at timestamptz,
  unique (platform_code, participant_code, account_label)
);
create index customer_account_requests_pending on customer_account_requests (accepted_at) where applied_at is null;

-- Who may act for which customer account under which label. A request names an account by participant code
-- and account label (funding, quotes, trades); a tenant of an account labelled L acts for it by naming itself
-- with L (issue 5). So that every (participant, label) names one account at most, a participant holds at most
-- one membership per label on its platform: its own account, or one account it is a tenant of. The row is
-- written when the creation or the tenant add is accepted (claiming the pair at once, so two concurrent
-- claims cannot both be accepted) and takes effect when the job applies it (effective_at).
create table account_memberships (
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  -- No foreign key: a pending creation's zrn has no customer_accounts row yet.
  zrn text not null,
  role text not null check (role in ('holder', 'tenant')),
  -- null while the creation or the tenant add that wrote the row is pending.
  effective_at timestamptz,
  created_at timestamptz not null default now(),
  primary key (platform_code, participant_code, account_label)
);
create index account_memberships_zrn on account_memberships (zrn, role);

-- Accounts that exist already have their holder as a member.
insert into account_memberships (platform_code, participant_code, account_label, zrn, role, effective_at, created_at)
select platform_code, participant_code, account_label, zrn, 'holder', created_at, created_at
from customer_accounts;

-- Tenant adds and removes: accepted (202) and applied later by a job, per account in acceptance order (seq).
-- Applied rows stay as the history that tells a former tenant (refused with 403) from a stranger.
create table tenant_changes (
  change_id uuid primary key,
  -- Acceptance order; acceptances for one account are serialised by a lock on the account row.
  seq bigserial not null unique,
  zrn text not null references customer_accounts (zrn),
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  -- The account's label (labels never change), so that the history is found by (participant, label).
  account_label text not null,
  change text not null check (change in ('add', 'remove')),
  accepted_at timestamptz not null,
  applied_at timestamptz
);
-- At most one pending add and one pending remove per participant and account: of two concurrent adds of the
-- same participant exactly one is accepted (issue 5), whatever the code above it does.
create unique index tenant_changes_one_pending on tenant_changes (zrn, participant_code, change) where applied_at is null;
create index tenant_changes_pending on tenant_changes (zrn, seq) where applied_at is null;
create index tenant_changes_history on tenant_changes (platform_code, participant_code, account_label) where applied_at is not null;
