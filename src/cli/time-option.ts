import { UsageError } from './command-args.ts';

/**
 * An ISO 8601 date, or date and time (`T` or a space) with an optional fraction and zone (`Z`, `+01`, `+0100` or
 * `+01:00`). Anything else is refused: Date.parse also takes "-5", "1.5" or "x 1" (as dates in 2001), which
 * redelivered the platform's whole history (review).
 */
const ISO_8601 =
  /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/** Its year, month and day are a day of the calendar: Date.parse rolls 2026-02-30 over to March 2. */
function realDate(date: string): boolean {
  const [year, month, day] = date.split('-').map(Number) as [number, number, number];
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day); // not Date.UTC, which reads years 0-99 as 1900-1999
  return at.getUTCFullYear() === year && at.getUTCMonth() === month - 1 && at.getUTCDate() === day;
}

/**
 * A time option (`--since`, `--until` of `svc webhooks redeliver-since`): epoch ms, or an ISO 8601 time, in UTC unless
 * it names its zone. A date
 * alone is already UTC to Date.parse, but a date and time without a zone was the machine's local time: an operator
 * east of UTC who gave midnight missed hours of notifications, and one west of it sent more again (probe).
 */
export function timeOption(raw: string, option = '--since'): number {
  // Four or eight digits are an ISO 8601 year or basic date as much as epoch ms (2026 ms after 1970, which would
  // redeliver everything): refused rather than guessed.
  if (/^(\d{4}|\d{8})$/.test(raw))
    throw new UsageError(
      `${option}: "${raw}" could be epoch ms or an ISO 8601 date; give epoch ms in full, or the date with dashes (2026-12-01)`,
    );
  // Ten digits are epoch seconds of this century as ms of 1970's first months: every notification would go again.
  if (/^\d{10}$/.test(raw))
    throw new UsageError(`${option}: "${raw}" looks like epoch seconds; give epoch ms (${raw}000)`);
  if (/^\d+$/.test(raw) && Number.isSafeInteger(Number(raw))) return Number(raw);
  const iso = ISO_8601.exec(raw);
  if (iso && realDate(iso[1]!)) {
    const [, date, time = '00:00', zone = 'Z'] = iso;
    // `+01` as `+01:00`: Date.parse takes only the hour and minute form.
    const offset = /^[+-]\d{2}$/.test(zone) ? `${zone}:00` : zone;
    const since = Date.parse(`${date}T${time}${offset}`);
    if (Number.isSafeInteger(since)) return since;
  }
  throw new UsageError(`${option}: "${raw}" is neither epoch ms nor an ISO 8601 time`);
}
