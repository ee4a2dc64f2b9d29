-- svc:no-transaction
-- Three list filters that read a platform's every row at volume (review with 1M fund events, 200k participants on
-- 133k onboarding submissions, half of them one platform's):
--
-- GET /fund/transactions?success=false: the failed deposits and expired sessions, a few among many, were found by
-- reading and counting every fund event of the platform (145-185 ms a page, at any page). A partial index holds
-- them alone, in the listing's order; the successful ones, nearly all, are read as before.
drop index concurrently if exists fund_events_failed;
create index concurrently fund_events_failed on fund_events (platform_code, deposit_timestamp desc, seq desc)
  where not success;

-- GET /participants?minors=true compares each customer's submitted date of birth: 100,000 probes of the
-- submissions for the platform's customers, and a sequential scan for the count (220 ms with no minor at all).
drop index concurrently if exists customer_submissions_date_of_birth;
create index concurrently customer_submissions_date_of_birth on customer_submissions ((payload ->> 'date_of_birth'));

-- GET /participants?email=: PostgreSQL gathers no statistics for the expression of a partial index, and both
-- indexes on lower(email) are partial (email is not null): it guessed 0.5 % of the platform's customers share an
-- email and walked them all in the listing's order instead (57 ms at 100k customers; 0.05 ms with these).
-- Statistics on an expression came with PostgreSQL 14: on 13 the estimate stays as it was (review).
do $$ begin if current_setting('server_version_num')::int >= 140000 then execute 'create statistics if not exists participants_lower_email on (lower(email)) from participants'; end if; end $$;
analyze participants;
