-- Whether a platform's RFQs may ask for the vendor's `quote_expiry` window (5 s … 15 m), which the vendor gates per
-- platform: a quote held 15 minutes is an option on the price source, and the operator had no way to refuse it
-- (review). True for the platforms there are, which took it until now. A constant default: no table rewrite.
alter table platforms add column quote_expiry_requests boolean not null default true;
