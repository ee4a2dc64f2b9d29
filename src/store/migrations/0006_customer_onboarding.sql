-- Customer onboarding (spec 4.6, 7.3; wire-contract §7, §9): one row per customer created through
-- POST /participants/customers/new. It keeps what the platform submitted, the canonical hash that decides
-- "same payload", the optional X-REQUEST-ID it came with, and the 201 answer that a repeat with the same
-- payload and the same X-REQUEST-ID gets again.
create table customer_submissions (
  participant_code text primary key references participants (participant_code),
  platform_code text not null references platforms (platform_code),
  -- The X-REQUEST-ID header as sent; null when there was none (an absent id equals no other, spec 7.3).
  request_id text check (length(request_id) between 1 and 255),
  -- Lower-case hex SHA-256 of the RFC 8785 canonical JSON of the body: key order and white space do not
  -- make a different payload.
  payload_hash text not null check (payload_hash ~ '^[0-9a-f]{64}$'),
  -- The customer's data as submitted.
  payload jsonb not null check (jsonb_typeof(payload) = 'object'),
  -- The original 201 message, kept as json (not jsonb) so that a replay is the same text, key order included.
  response json not null,
  created_at timestamptz not null default now()
);

-- spec 7.3 per platform: an X-REQUEST-ID names one creation, and one payload makes one participant. These
-- back the advisory locks the service takes, so that no race can ever record a second one.
create unique index customer_submissions_request_id
  on customer_submissions (platform_code, request_id) where request_id is not null;
create unique index customer_submissions_payload on customer_submissions (platform_code, payload_hash);

-- wire-contract §9: GET /participants/{email} answers 403 when the email belongs to another platform's
-- participant; this finds it without scanning every platform's participants.
create index participants_email on participants (lower(email)) where email is not null;
