-- Foundation: platforms and their API keys, participants, customer accounts, the balance ledger,
-- the price source and the webhook outbox that every domain writes its notifications to.

create table platforms (
  platform_code text primary key check (platform_code ~ '^[A-Z0-9]{6}$'),
  name text not null check (length(name) between 1 and 200),
  -- wire-contract §2.2: empty means allow all, which the service permits only in cert.
  ip_allowlist text[] not null default '{}',
  quote_expiry_ms integer check (quote_expiry_ms > 0),
  deposit_fee_bps numeric not null default 0 check (deposit_fee_bps >= 0),
  created_at timestamptz not null default now()
);

create table api_keys (
  api_key text primary key,
  platform_code text not null references platforms (platform_code),
  -- AES-256-GCM with the server key from config; never the plain secret (wire-contract §1).
  secret_ciphertext bytea not null,
  -- scrypt; never the plain passphrase.
  passphrase_hash text not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index api_keys_platform on api_keys (platform_code);

create table participants (
  participant_code text primary key check (participant_code ~ '^[A-Z0-9]{6}$'),
  platform_code text not null references platforms (platform_code),
  kind text not null default 'customer' check (kind in ('platform', 'customer')),
  email text,
  first_name text,
  last_name text,
  status text not null default 'approved'
    check (status in ('submitted', 'approved', 'rejected', 'locked', 'disabled', 'divested', 'closed')),
  reason_code text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index participants_platform_email on participants (platform_code, lower(email)) where email is not null;
create index participants_platform on participants (platform_code, created_at);

create table customer_accounts (
  zrn text primary key check (zrn ~ '^zrn:svc:(us|eu|uk|ww|bz|au):account:customer:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  region text not null,
  type text not null default 'individual'
    check (type in ('individual', 'business', 'jtic', 'jtwros', 'trust', 'utma')),
  tier text check (tier in ('lite', 'pro', 'bronze', 'silver', 'gold')),
  prefunded boolean not null default true,
  status text not null default 'open' check (status in ('open', 'locked', 'withdraw_locked', 'divesting', 'closed')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (platform_code, participant_code, account_label)
);

-- The ledger: one row per (participant, group, label, type, asset) balance, and its movements.
create table balance_accounts (
  account_id uuid primary key,
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_group text not null,
  account_label text not null,
  account_type text not null
    check (account_type in ('available', 'collateral', 'payable', 'receivable', 'collateral_deficiency', 'staked')),
  asset text not null,
  balance numeric not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (participant_code, account_group, account_label, account_type, asset)
);
create index balance_accounts_platform on balance_accounts (platform_code, participant_code);

create table balance_movements (
  movement_id uuid primary key,
  account_id uuid not null references balance_accounts (account_id),
  run_id text not null,
  run_type text not null,
  movement_type text not null,
  change numeric not null,
  movement_timestamp timestamptz not null default now()
);
create index balance_movements_account on balance_movements (account_id, movement_timestamp);
create index balance_movements_run on balance_movements (run_id);

create table prices (
  underlying text not null check (underlying ~ '^[A-Z0-9]{1,12}$'),
  quoted_currency text not null check (quoted_currency ~ '^[A-Z0-9]{1,12}$'),
  price numeric not null check (price > 0),
  updated_at timestamptz not null default now(),
  primary key (underlying, quoted_currency)
);

-- The transactional outbox (wire-contract §5 "Durability"): a row is written in the same transaction as
-- the change that causes it. Delivery state is added by the webhooks migration.
create table webhook_notifications (
  notification_id uuid primary key,
  -- Commit-order position, used to keep per-resource order.
  seq bigserial not null unique,
  platform_code text not null references platforms (platform_code),
  payload_type text not null,
  resource_key text not null,
  payload jsonb not null,
  created_at timestamptz not null default now()
);
create index webhook_notifications_resource on webhook_notifications (platform_code, resource_key, seq);
