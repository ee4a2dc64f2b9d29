-- When each API key was last used (to the minute): whether a key about to be revoked is still in use, and whether a
-- leaked one was used and when. Written at most once a minute per key and instance (authenticator.ts).
alter table api_keys add column last_used_at timestamptz;
