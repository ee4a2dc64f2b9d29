-- Quotes, trades and settlement (issue 7; spec 3.1, 4.6, 6, 7.2; wire-contract §5, §7).
-- Depends only on 0001 (platforms, participants, the ledger).

-- A liquidity or convert-and-withdraw quote. It can be executed once, before expire_at: execution is an
-- atomic `update … where executed_at is null and expire_at > now` (wire-contract §7), and the trade's
-- unique quote_id below backs that up, so a quote makes at most one trade on any number of instances.
create table quotes (
  quote_id uuid primary key,
  request_id uuid not null,
  platform_code text not null references platforms (platform_code),
  kind text not null check (kind in ('liquidity', 'convert_withdraw')),
  -- The participant named in the request (a tenant acts like the primary holder, issue 5)...
  participant_code text not null,
  -- ...and the one whose balances move.
  owner_participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  zrn text,
  side text not null check (side in ('buy', 'sell')),
  underlying text not null,
  quoted_currency text not null,
  quantity numeric not null check (quantity > 0),
  price numeric not null check (price > 0),
  -- The price source's price before the spread.
  source_price numeric not null check (source_price > 0),
  total_notional numeric not null check (total_notional > 0),
  asset_cost_notional numeric not null check (asset_cost_notional > 0),
  spread_bps numeric not null default 0 check (spread_bps >= 0 and spread_bps < 10000),
  spread_notional numeric not null default 0 check (spread_notional >= 0),
  network_fee_notional numeric check (network_fee_notional >= 0),
  network_fee_quantity numeric check (network_fee_quantity >= 0),
  withdrawal_address text check (length(withdrawal_address) between 1 and 200),
  destination_tag text,
  no_destination_tag boolean,
  created_at timestamptz not null,
  expire_at timestamptz not null,
  executed_at timestamptz,
  check (expire_at > created_at),
  check ((kind = 'convert_withdraw') = (withdrawal_address is not null))
);
create index quotes_platform on quotes (platform_code, created_at);

create table trades (
  trade_id uuid primary key,
  platform_code text not null references platforms (platform_code),
  -- wire-contract §7: the quote_id for executed quotes, so GET /trades?client_trade_id= finds them.
  client_trade_id text not null check (length(client_trade_id) between 1 and 50),
  quote_id uuid unique references quotes (quote_id),
  source text not null check (source in ('liquidity', 'convert_withdraw', 'operator')),
  -- spec 3.1: net settlement (allocation) trades emit no notification.
  net_settlement boolean not null default false,
  participant_code text not null,
  owner_participant_code text not null references participants (participant_code),
  account_label text not null check (length(account_label) between 1 and 100),
  zrn text,
  counterparty_code text not null,
  side text not null check (side in ('buy', 'sell')),
  underlying text not null,
  quoted_currency text not null,
  trade_price numeric not null check (trade_price > 0),
  trade_quantity numeric not null check (trade_quantity > 0),
  total_notional numeric not null check (total_notional > 0),
  asset_cost_notional numeric not null check (asset_cost_notional > 0),
  spread_bps numeric check (spread_bps >= 0),
  spread_notional numeric check (spread_notional >= 0),
  network_fee_notional numeric check (network_fee_notional >= 0),
  network_fee_quantity numeric check (network_fee_quantity >= 0),
  -- What the owner pays and receives at settlement (ledger assets, without a network suffix).
  pay_asset text not null,
  pay_amount numeric not null check (pay_amount > 0),
  receive_asset text not null,
  receive_amount numeric not null check (receive_amount > 0),
  comment text check (length(comment) <= 500),
  trade_state text not null default 'accepted' check (trade_state in ('accepted', 'active', 'terminated')),
  transaction_at timestamptz not null,
  accepted_at timestamptz not null,
  -- When settlement is first attempted (accepted → active is scheduled for then).
  settlement_at timestamptz not null,
  active_at timestamptz,
  settled_at timestamptz,
  updated_at timestamptz not null,
  created_at timestamptz not null default now(),
  unique (platform_code, client_trade_id),
  check (
    (trade_state = 'accepted' and active_at is null and settled_at is null)
    or (trade_state = 'active' and active_at is not null and settled_at is null)
    or (trade_state = 'terminated' and active_at is not null and settled_at is not null)
  )
);
create index trades_platform_time on trades (platform_code, transaction_at desc, trade_id desc);
-- Funds already promised by unsettled trades (checked at execution, wire-contract §7).
create index trades_open_obligations on trades (owner_participant_code, account_label, pay_asset)
  where trade_state <> 'terminated';

-- spec 3.1 and 6.3: nothing changes after `terminated`, and states only move forward. Enforced here so
-- that no code path, instance or operator with SQL access can break it.
create function trades_guard_update() returns trigger language plpgsql as $$
begin
  if old.trade_state = 'terminated' then
    raise exception 'trade % is terminated: no further change is allowed', old.trade_id
      using errcode = 'check_violation';
  end if;
  if not (
    new.trade_state = old.trade_state
    or (old.trade_state = 'accepted' and new.trade_state = 'active')
    or (old.trade_state = 'active' and new.trade_state = 'terminated')
  ) then
    raise exception 'trade %: % → % is not a transition', old.trade_id, old.trade_state, new.trade_state
      using errcode = 'check_violation';
  end if;
  if (to_jsonb(new) - array['trade_state', 'active_at', 'settled_at', 'updated_at'])
     is distinct from (to_jsonb(old) - array['trade_state', 'active_at', 'settled_at', 'updated_at']) then
    raise exception 'trade %: only the state and its timestamps change', old.trade_id
      using errcode = 'check_violation';
  end if;
  return new;
end;
$$;
create trigger trades_guard_update before update on trades
  for each row execute function trades_guard_update();

create function trades_guard_delete() returns trigger language plpgsql as $$
begin
  if old.trade_state = 'terminated' then
    raise exception 'trade % is terminated: it cannot be deleted', old.trade_id
      using errcode = 'check_violation';
  end if;
  return old;
end;
$$;
create trigger trades_guard_delete before delete on trades
  for each row execute function trades_guard_delete();

-- Convert and withdraw: the withdrawal that goes with a trade, debited when the trade settles.
create table withdrawal_requests (
  withdrawal_request_id uuid primary key,
  platform_code text not null references platforms (platform_code),
  trade_id uuid not null unique references trades (trade_id),
  participant_code text not null references participants (participant_code),
  account_label text not null,
  asset text not null,
  withdrawal_address text not null check (length(withdrawal_address) between 1 and 200),
  destination_tag text,
  no_destination_tag boolean,
  quantity numeric not null check (quantity > 0),
  network_fee_quantity numeric not null default 0 check (network_fee_quantity >= 0),
  status text not null default 'pending' check (status in ('pending', 'settled')),
  created_at timestamptz not null,
  settled_at timestamptz,
  check ((status = 'settled') = (settled_at is not null))
);
create index withdrawal_requests_platform on withdrawal_requests (platform_code, created_at);
