-- svc:no-transaction
-- An email is one identity whatever its letter case, and the service tells that by JavaScript's toLowerCase (emails
-- are ASCII: the `email` format takes nothing else). The indexes compared lower(email), which follows the database's
-- locale: on one created Turkish or Azerbaijani (ICU tr-TR, or LC_CTYPE tr_TR.UTF-8) lower('I') is 'ı', so no look-up
-- found a customer whose email has a capital I, and the same email in other letters was taken again as a new
-- customer, 201 (probe). lower(email collate "C") lowers A-Z alone, as toLowerCase does ASCII, on any database.
--
-- Where that happened, two participants of one platform now share an email: the unique index cannot be built, and
-- which one is the customer is for the operator to say. The check names them (at most 20), and nothing has changed:
-- give one of each pair another email, then start again.
do $$
declare
  shared text := (
    select string_agg(format('platform %s: %s', platform_code, codes), '; ')
      from (select platform_code,
                   string_agg(format('%s <%s>', participant_code, email), ', ' order by participant_code) as codes
              from participants
             where email is not null
             group by platform_code, lower(email collate "C")
            having count(*) > 1
             order by platform_code, min(participant_code)
             limit 20) d);
begin
  if shared is not null then
    raise exception 'participants of one platform share an email in other letter case (%): give one of each another email, then start again', shared;
  end if;
end
$$;

-- Built CONCURRENTLY (src/store/migrate.ts, as 0030) under new names, then put in the old ones' place in one
-- transaction: an instance of an earlier version maps a refused duplicate to 409 by the unique index's name, and
-- while the old index is there it is the one that refuses (PostgreSQL checks a table's indexes oldest first), so it
-- keeps the name until it goes (review: dropped first, the old instances answered 500 until the rename). That drop
-- locks the table for a moment, its wait bounded as an ALTER TABLE's. Dropped first, each new name: a build
-- stopped halfway leaves an invalid index behind.
drop index concurrently if exists participants_platform_email_ascii;
create unique index concurrently participants_platform_email_ascii on participants (platform_code, lower(email collate "C"))
  where email is not null;
drop index concurrently if exists participants_email_ascii;
create index concurrently participants_email_ascii on participants (lower(email collate "C")) where email is not null;
do $$
begin
  drop index if exists participants_platform_email;
  alter index participants_platform_email_ascii rename to participants_platform_email;
  drop index if exists participants_email;
  alter index participants_email_ascii rename to participants_email;
end
$$;

-- 0035's statistics, for the new expression: PostgreSQL keeps none for a partial index's.
drop statistics if exists participants_lower_email;
do $$
begin
  if current_setting('server_version_num')::int >= 140000 then
    execute 'create statistics if not exists participants_lower_email on (lower(email collate "C")) from participants';
  end if;
end
$$;
analyze participants;
