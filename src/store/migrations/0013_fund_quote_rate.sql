-- POST /fund/rfq answers a rate and its expiry, which the vendor describes as "the rate by which a
-- subsequent on-chain deposit will be honored at"; deposits were priced at the price source's rate when they
-- were recorded, so a customer shown one rate could be credited at another within the quote's time. A fund
-- quote's session now keeps what it quoted, and a deposit that this session funds (the participant's most
-- recent session, wire-contract §6) in the same asset and account label, made by the expiry, is credited at
-- that rate.
alter table funding_sessions
  add column quoted_rate numeric check (quoted_rate > 0),
  add column quote_expires_at timestamptz,
  add check ((quoted_rate is null) = (quote_expires_at is null)),
  add check (quoted_rate is null or source = 'fund_rfq');
