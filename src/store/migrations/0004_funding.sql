-- Account funding (issue 6; spec 2.2, 2.3, 4.3–4.5; wire-contract §6): SDK tokens and their revocation list,
-- deposit addresses, funding sessions with the platform's reference, and fund events.

-- Every SDK token issued by POST /client_auth_token: the revocation list is the rows with revoked_at set, and
-- a token whose jti is not here was not issued by this service.
create table client_auth_tokens (
  jti uuid primary key,
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  permissions text[] not null check (cardinality(permissions) > 0),
  issued_at timestamptz not null,
  expires_at timestamptz not null,
  revoked_at timestamptz
);
create index client_auth_tokens_platform on client_auth_tokens (platform_code, issued_at);

-- wire-contract §6: one address per (participant, account label, network), unique across the service.
create table deposit_addresses (
  address text primary key,
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  network text not null check (network ~ '^[A-Z0-9]{2,12}$'),
  -- The asset of the most recent fund quote for this address: what a deposit is taken to be when the chain
  -- indexer does not say (one network address can receive several assets, e.g. ETH and USDC).
  last_fund_asset text,
  created_at timestamptz not null default now(),
  unique (participant_code, account_label, network)
);
create index deposit_addresses_platform on deposit_addresses (platform_code, participant_code);

-- wire-contract §6: a funding session is opened by POST /client_auth_token with `fwc` or by POST /fund/rfq;
-- a deposit carries the reference of the participant's most recent session opened at or before it.
create table funding_sessions (
  session_id uuid primary key,
  -- Tie-break for sessions opened in the same millisecond: the later insert is the more recent.
  seq bigserial not null unique,
  platform_code text not null references platforms (platform_code),
  participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  source text not null check (source in ('client_auth_token', 'fund_rfq')),
  reference_id text not null default '' check (length(reference_id) <= 50),
  fund_asset text,
  token_jti uuid unique references client_auth_tokens (jti),
  opened_at timestamptz not null,
  -- Token sessions only: when a session with no deposit is reported expired, and when that was done.
  expires_at timestamptz,
  expired_at timestamptz,
  check ((source = 'client_auth_token') = (token_jti is not null))
);
create index funding_sessions_recent on funding_sessions (platform_code, participant_code, opened_at desc, seq desc);

-- Spec 2.2 fund events: recorded deposits (success or failure) and expired sessions (wire-contract §5).
create table fund_events (
  fund_id uuid primary key,
  seq bigserial not null unique,
  platform_code text not null references platforms (platform_code),
  kind text not null check (kind in ('deposit', 'session_expired')),
  -- The participant the deposit belongs to (whose address or session it was) ...
  participant_code text not null references participants (participant_code),
  -- ... and whose balance moved: the primary holder when a tenant funded the account (issue 5).
  owner_participant_code text references participants (participant_code),
  account_label text not null,
  fund_asset text not null,
  deposited_asset text not null,
  rate numeric not null check (rate >= 0),
  quoted_currency text not null,
  source_address text not null default '',
  deposit_address text references deposit_addresses (address),
  quantity numeric not null check (quantity >= 0),
  notional numeric not null check (notional >= 0),
  success boolean not null,
  status_reason text not null default '',
  fund_timestamp timestamptz not null,
  deposit_timestamp timestamptz not null,
  transaction_id text,
  is_first_deposit boolean not null default false,
  -- Spec 2.2: each fee can be an empty string (null here) when no fee applies.
  raw_fee_bps numeric,
  deposit_fee_bps numeric,
  raw_fee_notional numeric,
  deposit_fee_notional numeric,
  reference_id text not null default '',
  session_id uuid references funding_sessions (session_id),
  created_at timestamptz not null default now(),
  check ((kind = 'deposit') = (transaction_id is not null and deposit_address is not null)),
  -- Issue 6: the same on-chain transaction to the same address is one fund event, however often it is reported.
  unique (deposit_address, transaction_id)
);
create index fund_events_recent on fund_events (platform_code, deposit_timestamp desc, seq desc);
create index fund_events_participant on fund_events (platform_code, participant_code, deposit_timestamp desc);
create index fund_events_reference on fund_events (platform_code, reference_id) where reference_id <> '';
create index fund_events_session on fund_events (session_id);
-- An expired session is reported once, whatever the number of job attempts.
create unique index fund_events_one_expiry on fund_events (session_id) where kind = 'session_expired';
