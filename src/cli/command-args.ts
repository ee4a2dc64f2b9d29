/**
 * Reading a command's arguments: options arrive parsed by node's util.parseArgs (string values, repeated
 * ones as arrays), positionals as strings. Shared by the operator and the platform (`svc api`) commands.
 */
import { NON_NEGATIVE_DECIMAL_PATTERN } from '../lib/decimal-form.ts';
import { pathSegment } from '../sdk/path-segment.ts';

export type Options = Record<string, string | boolean | string[] | undefined>;

/** A mistake in the command line (exit code 2). */
export class UsageError extends Error {}

/**
 * How many arguments a usage line takes after the command's `name` (`svc keys revoke API_KEY`: 1), Infinity
 * when the last repeats (`PLATFORM [CIDR...]`, `PAIR=PRICE...`): the words before its first option.
 */
export function argumentLimit(usage: string, name: string): number {
  if (!usage.startsWith(name)) throw new Error(`usage "${usage}" is not of "${name}"`);
  let count = 0;
  for (const word of usage.slice(name.length).split(/\s+/).filter(Boolean)) {
    if (word.startsWith('--') || word.startsWith('[--') || word.startsWith('(')) break;
    if (word.includes('...')) return Infinity;
    count++;
  }
  return count;
}

/**
 * Arguments beyond those the usage line takes are refused rather than ignored: `svc keys revoke K1 K2`
 * revoked K1 only, and said nothing of K2.
 */
export function refuseExtraArguments(args: string[], usage: string, name: string): void {
  const extra = args.slice(argumentLimit(usage, name));
  if (extra.length > 0) {
    throw new UsageError(
      `${extra.map((arg) => JSON.stringify(arg)).join(', ')}: ${extra.length === 1 ? 'an argument' : 'arguments'} "${name}" does not take; usage: ${usage}`,
    );
  }
}

/** The options a usage line names (`--page N`, `[--failed --reason TEXT]`): what the command reads. */
export function usageOptions(usage: string): string[] {
  return [...usage.matchAll(/--([a-z][a-z0-9-]*)/g)].map((match) => match[1]!);
}

/**
 * An option the command does not read is refused rather than ignored (`svc platforms list --name x` would
 * otherwise list every platform as if it had been filtered).
 */
export function refuseOtherOptions(given: Options, allowed: Iterable<string>, command: string): void {
  const known = new Set(allowed);
  const other = Object.keys(given).filter((name) => given[name] !== undefined && !known.has(name));
  if (other.length > 0) {
    throw new UsageError(
      `${other.map((name) => `--${name}`).join(', ')}: not ${other.length === 1 ? 'an option' : 'options'} of "${command}"; see svc --help`,
    );
  }
}

export function required(options: Options, name: string): string {
  const value = options[name];
  // Given empty, it was not forgotten: "is required" sent its user looking for a missing option (probe).
  if (value === '') throw new UsageError(`--${name} must not be empty`);
  if (typeof value !== 'string') throw new UsageError(`--${name} is required`);
  return value;
}

/**
 * `value` when it is one of `values`, else a usage error naming `what` (an option, an argument, a list's entries),
 * checked here: a server's 400 for it was an exit 1, not a usage error (review).
 */
export function choice<T extends string>(value: string, what: string, values: readonly T[]): T {
  if (!(values as readonly string[]).includes(value))
    throw new UsageError(`${what} must be one of ${values.join(', ')}, got "${value}"`);
  return value as T;
}

/** An option that takes one of `values` (see `choice`); undefined when left out. */
export function oneOf<T extends string>(options: Options, name: string, values: readonly T[]): T | undefined {
  const value = optionalString(options, name);
  if (value === undefined) return undefined;
  return choice(value, `--${name}`, values);
}

/** A switch given as `on` or `off`: true, false, or undefined when left out. */
export function onOff(options: Options, name: string): boolean | undefined {
  const value = oneOf(options, name, ['on', 'off'] as const);
  return value === undefined ? undefined : value === 'on';
}

/**
 * A text option, or undefined when left out. Given empty, it is a usage error naming it, as `required` says (README
 * CLI): sent, `--label ""` came back as the server's 400, an exit 1 (probe).
 */
export function optionalString(options: Options, name: string): string | undefined {
  const value = options[name];
  if (value === '') throw new UsageError(`--${name} must not be empty`);
  return typeof value === 'string' ? value : undefined;
}

/**
 * A repeatable, comma-separable option (`--allow A --allow B,C`) as a list; undefined when absent. An empty entry
 * is refused, not dropped: `--allow "$IP"` with IP unset made a platform with an empty allow-list, which lets
 * every address in (probe).
 */
export function list(options: Options, name: string): string[] | undefined {
  const value = options[name];
  if (value === undefined) return undefined;
  return entriesOf(Array.isArray(value) ? value : [String(value)], `--${name}`);
}

/** Values given as arguments, each of which may be comma-separated, as one list; an empty entry is refused (list). */
export function entriesOf(values: string[], name: string): string[] {
  const entries = values.flatMap((v) => v.split(','));
  if (entries.some((entry) => entry.trim() === ''))
    throw new UsageError(`${name} has an empty value (given empty, or between commas)`);
  return entries;
}

export function positional(positionals: string[], index: number, name: string): string {
  const value = positionals[index];
  if (!value) throw new UsageError(`<${name}> is required`);
  return value;
}

/**
 * A positional argument sent as one segment of a request path, by the SDK's pathSegment: percent-encoded, `.` and
 * `..` refused (an SvcArgumentError, a usage error to svc), which the URL parser would drop or climb, so that
 * `svc keys create ..` went to another route than its own (probe).
 */
export function pathArgument(positionals: string[], index: number, name: string): string {
  return pathSegment(positional(positionals, index, name), `<${name}>`);
}

const NON_NEGATIVE_DECIMAL = new RegExp(NON_NEGATIVE_DECIMAL_PATTERN);

/** A non-negative decimal option (`--deposit-fee-bps 12.5`), or undefined when absent; its range is the server's. */
export function optionalDecimal(options: Options, name: string): string | undefined {
  const value = optionalString(options, name);
  if (value === undefined) return undefined;
  // The server's form (a leading zero refused, as it refuses it), so that what passes here is not sent to a 400.
  if (!NON_NEGATIVE_DECIMAL.test(value))
    throw new UsageError(`--${name} must be a decimal number, got "${value}"`);
  return value;
}

/** A positive integer option (`--page 2`), or undefined when absent. */
export function optionalInteger(options: Options, name: string): number | undefined {
  const value = optionalString(options, name);
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number, got "${value}"`);
  return Number(value);
}

/**
 * A listing's query from its options, each `[option, parameter]`: a text option given is sent under its parameter's
 * name, refused when empty as `required` refuses it (sent, it came back the server's 400, exit 1, not 2); a whole
 * number one (`--page`) is checked here as every command's page is.
 */
export function listingQuery(
  options: Options,
  texts: ReadonlyArray<readonly [option: string, parameter: string]>,
  wholeNumbers: ReadonlyArray<readonly [option: string, parameter: string]> = [['page', 'page']],
): URLSearchParams {
  const query = new URLSearchParams();
  for (const [option, parameter] of texts)
    if (options[option] !== undefined) query.set(parameter, required(options, option));
  for (const [option, parameter] of wholeNumbers) {
    const value = optionalInteger(options, option);
    if (value !== undefined) query.set(parameter, String(value));
  }
  return query;
}
