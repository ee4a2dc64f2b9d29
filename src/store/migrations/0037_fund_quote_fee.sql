-- POST /fund/rfq answers the platform's deposit_fee_bps beside its rate, and a deposit the quote honours was
-- credited at the quoted rate but charged the fee in force when it was recorded: an operator who raised the fee
-- within a quote's time charged the end customer more than the quote had shown (review). A fund quote's session
-- now keeps the fee it showed, honoured with its rate. Null on the sessions quoted before: their deposits are
-- charged the fee in force, as before.
alter table funding_sessions
  add column quoted_fee_bps numeric check (quoted_fee_bps >= 0),
  add check (quoted_fee_bps is null or quoted_rate is not null);
