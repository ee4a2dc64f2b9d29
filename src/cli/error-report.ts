import { SvcConnectionError, SvcError } from '../sdk/errors.ts';
import { FIREWALL_REFUSAL_TEXT } from '../contract/wire-values.ts';
import { AdminApiError, isOperatorApiFailure } from './admin-client.ts';

/**
 * How `svc` reports an API's refusal: readable text for a person (the status, each entry of the server's
 * `errors` list on its own line, or its `error`/`message`, and the request id to quote to support), or one
 * JSON object with `--json`; and the exit code (1 refused, 3 no server answered).
 */
export interface FailureReport {
  exitCode: 1 | 3;
  text: string;
  json: {
    status: number | null;
    request_id: string | null;
    errors: string[];
    body: unknown;
    /** The request may have been carried out: no answer said, and the SDK's check could not tell. */
    outcome_unknown?: true;
    /** What answered an operator command is not the operator API (another listener, a proxy): check --admin-url. */
    not_operator_api?: true;
    /** What the command adds (an ExplainedFailure's details: a redelivery's count and where to go on). */
    [detail: string]: unknown;
  };
}

/**
 * spec 7.1.2: a write that got no answer (or a 502/504) may or may not have been carried out, unless an
 * idempotence check showed it was not (the SDK's `outcomeUnknown`: the call has none, or the check failed
 * too). Said so, rather than only "unreachable", so that nobody repeats it blindly; where to look depends on
 * the API the write went to (probe: an operator's balance adjustment, which has no idempotency key, was told
 * to look at the platform's trades).
 */
const OUTCOME_UNKNOWN = '  outcome unknown: the request may have been carried out; look';
// Each of the API's writes is seen in one of these reads (probe: a customer account's creation, a tenant change, a
// customer's onboarding were all told to look at the trades).
const LOOK_IN_PUBLIC_API = `${OUTCOME_UNKNOWN} (with the API's reads that show what the command changes: svc api trades, accounts, details ZRN, participants) before repeating it`;
const LOOK_IN_OPERATOR_API = `${OUTCOME_UNKNOWN} (with the operator API's reads: svc platforms list, svc keys list, svc prices list, svc webhooks notifications PLATFORM for what is notified) before repeating it`;

/** Each operator write's failure, with the read that shows its effect (its command's `seenWith`). */
const seenWith = new WeakMap<object, string>();

/**
 * Notes which read shows whether the write that met `error` was carried out, for the outcome-unknown line: the list
 * of every read named none of those of the writes with no idempotency key (review: a balance adjustment was told to
 * look at the platforms, keys and prices).
 */
export function noteWhereSeen(error: unknown, read: string | undefined): unknown {
  // An explained failure is reported as the failure it wraps, with its line (review: a redelivery that failed part
  // way named every read).
  const failure = error instanceof ExplainedFailure ? error.failure : error;
  if (read !== undefined && typeof failure === 'object' && failure !== null) seenWith.set(failure, read);
  return error;
}

function withOutcome(error: SvcError | AdminApiError, report: FailureReport): FailureReport {
  if (!error.outcomeUnknown) return report;
  const read = seenWith.get(error);
  const hint = !isOperatorApiFailure(error)
    ? LOOK_IN_PUBLIC_API
    : read === undefined
      ? LOOK_IN_OPERATOR_API
      : `${OUTCOME_UNKNOWN} with ${read} before repeating it`;
  return {
    ...report,
    text: `${report.text}\n${hint}`,
    json: { ...report.json, outcome_unknown: true },
  };
}

/** The lines that say what the server objected to, from any of the wire-contract §3 error bodies. */
export function errorLines(body: unknown): string[] {
  if (body === undefined || body === null || body === '') return [];
  if (typeof body === 'string') return [shortened(body.trim())];
  const { errors, error, message } = body as { errors?: unknown; error?: unknown; message?: unknown };
  // An entry that is no text (another server's `{"code", "detail"}`) as JSON: String() printed "[object Object]" (probe).
  if (Array.isArray(errors))
    return errors.map((entry) => (typeof entry === 'string' ? entry : JSON.stringify(entry)));
  if (typeof message === 'string') return [message];
  if (typeof error === 'string') return [error];
  return [JSON.stringify(body)];
}

/** Text bodies are shown up to this many characters: a proxy's error page was printed whole (review: 5 KB of HTML). */
const SHOWN_TEXT = 300;

function shortened(text: string): string {
  return text.length <= SHOWN_TEXT
    ? text
    : `${text.slice(0, SHOWN_TEXT)}… (${text.length} characters in all)`;
}

/** The --json report of a failure that got no answer from a server (a usage error, no server, …). */
export function failureJson(message: string): FailureReport['json'] {
  return { status: null, request_id: null, errors: [message], body: null };
}

/**
 * A failure with a line of what it means for the command that met it (an execute's 404 after the SDK looked for
 * the trade and found none: the quote expired; a redelivery stopped part way: where to go on), and, for `--json`,
 * the same as fields of the report (`details`).
 */
export class ExplainedFailure extends Error {
  constructor(
    readonly failure: SvcError | AdminApiError | SvcConnectionError,
    readonly explanation: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(failure.message);
  }
}

/**
 * Whether a 404's body is the operator API's naming what it did not find (`{"error": "Not Found", "message": …}`).
 * Anything else came from another listener: a bare `{"error": "Not Found"}`, or another server's page (probe: an
 * HTML 404 was printed whole, without the hint).
 */
function namesWhatIsMissing(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const { error, message, statusCode } = body as { error?: unknown; message?: unknown; statusCode?: unknown };
  // Another framework's 404 at that address (Fastify's default, NestJS's) carries `statusCode`, which the operator
  // API's never does (review).
  return error === 'Not Found' && typeof message === 'string' && statusCode === undefined;
}

/** How the public API's 401 for a request without its credentials begins (authenticator.ts). */
const PUBLIC_CREDENTIALS_MISSING = 'missing header X-SCX-';

/** A report for an error from the SDK or the operator client; undefined for anything else (a bug: rethrow). */
export function reportFailure(error: unknown): FailureReport | undefined {
  if (error instanceof ExplainedFailure) {
    const report = reportFailure(error.failure)!;
    return {
      ...report,
      text: `${report.text}\n  ${error.explanation}`,
      json: { ...report.json, ...error.details },
    };
  }
  if (error instanceof SvcConnectionError) {
    return withOutcome(error, {
      exitCode: 3,
      // Where it looked: a second terminal without the server's SVC_PORT (or SVC_URL) tried the default (review).
      text: `error: server unreachable${error.baseUrl ? ` at ${error.baseUrl}` : ''} (${error.message})`,
      json: failureJson(error.message),
    });
  }
  if (error instanceof SvcError || error instanceof AdminApiError) {
    const requestId = (error as { requestId?: string }).requestId;
    const lines = errorLines(error.body);
    const head = `error: the ${error instanceof AdminApiError ? 'operator API' : 'API'} answered ${error.status}`;
    // The first objection on the status line, any others one per line below it.
    const [first, ...more] = lines;
    // The operator API names what it did not find; a bare 404 came from another listener (review: SVC_URL, the
    // public API's, where SVC_ADMIN_LISTEN gives the operator API an address of its own). So does a 401 asking for
    // the public API's credentials (that listener authenticates a path it has no route for before its 404), or its
    // firewall's 1020.
    const notOperatorApi =
      error instanceof AdminApiError &&
      // A 2xx refused: an answer that is not the operator API's (its 2xx always has what was asked for).
      ((error.status >= 200 && error.status <= 299) ||
        (error.status === 404 && !namesWhatIsMissing(error.body)) ||
        (error.status === 401 && first?.startsWith(PUBLIC_CREDENTIALS_MISSING)) ||
        (error.status === 403 && first === FIREWALL_REFUSAL_TEXT));
    const elsewhere = notOperatorApi
      ? [
          '  no operator API answered: is --admin-url (SVC_ADMIN_URL) its address (SVC_ADMIN_LISTEN when set)?',
        ]
      : [];
    const text = [
      first === undefined ? `${head} (empty body)` : `${head}: ${first}`,
      ...more.map((line) => `  ${line}`),
      ...elsewhere,
      ...(requestId ? [`  request id: ${requestId}`] : []),
    ].join('\n');
    return withOutcome(error, {
      exitCode: 1,
      text,
      json: {
        status: error.status,
        request_id: requestId ?? null,
        errors: lines,
        body: error.body ?? null,
        // With --json the hint line is not printed: a script is told the same by a field (probe: it was lost).
        ...(notOperatorApi ? { not_operator_api: true as const } : {}),
      },
    });
  }
  return undefined;
}
