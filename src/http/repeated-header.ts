/**
 * The first of `names` (lower case) that a request gives on more than one line, as the request wrote it; undefined
 * when none is. Node keeps only the first line of some headers (Host, Authorization) and joins the lines of others
 * with ", " (custom ones), so a repeated header was served on its first value or refused for a value nobody sent
 * (probes): read off `rawHeaders` (name, value, name, value, …) instead, to be refused by name. Every request passes
 * here, so a name is lower-cased only when its length is one of `names`'.
 */
export function repeatedHeader(rawHeaders: string[], names: readonly string[]): string | undefined {
  let seen: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const raw = rawHeaders[i]!;
    if (!names.some((name) => name.length === raw.length)) continue;
    const name = raw.toLowerCase();
    if (!names.includes(name)) continue;
    if (seen?.includes(name)) return raw;
    (seen ??= []).push(name);
  }
  return undefined;
}
