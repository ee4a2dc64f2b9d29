import { Type, type TSchema } from 'typebox';
import { FIREWALL_REFUSAL_TEXT } from './wire-values.ts';

/**
 * wire-contract §3: success is {"message": …}; lists add page and total_pages (and page_size, count);
 * error bodies as in the vendor's document. Every route's response schema is built from these, so the
 * schema is the allow-list of what leaves the server.
 */
export const Envelope = <T extends TSchema>(message: T) => Type.Object({ message });

const pageOfItems = <T extends TSchema>(item: T) => ({
  message: Type.Array(item),
  page: Type.Integer({ minimum: 1 }),
  page_size: Type.Integer({ minimum: 1 }),
  total_pages: Type.Integer({ minimum: 0 }),
});

/** A page of a list whose vendor document gives `count`, how many items match in all (trades, participants). */
export const PagedEnvelope = <T extends TSchema>(item: T) =>
  Type.Object({ ...pageOfItems(item), count: Type.Integer({ minimum: 0 }) });

/** A page of a list whose vendor document has no `count` (GetFundTransactionsResponse): wire-contract §3. */
export const PagedEnvelopeWithoutCount = <T extends TSchema>(item: T) => Type.Object(pageOfItems(item));

/**
 * Text a caller names something with or that is shown to people (account labels, references, a customer's names
 * and address): no control character (C0, DEL, C1: a newline, a tab, a bell) and no bidirectional embedding,
 * override or isolate (U+202A-U+202E, U+2066-U+2069), which make two values that print alike differ or one print
 * as another. Such values travel in webhooks and trade parties, and a label is half of the (participant, label) key
 * (review: `"a\nb"` and `"\u202egeneral"` were taken as labels, and a BEL in a first name). The bidirectional
 * marks (U+200E, U+200F, U+061C), which keyboards of right-to-left scripts put in names, are text like any other.
 */
/** DEL, the C1 controls and the bidirectional embeddings, overrides and isolates: refused in both forms below. */
const OTHER_CONTROLS = '\\u007F-\\u009F\\u202A-\\u202E\\u2066-\\u2069';
/** The line and paragraph separators: line breaks, as a newline is (probe: they passed as labels). */
const LINE_SEPARATORS = '\\u2028\\u2029';
const ONE_LINE_CONTROLS = `\\u0000-\\u001F${OTHER_CONTROLS}${LINE_SEPARATORS}`;
export const PRINTABLE_TEXT_PATTERN = `^[^${ONE_LINE_CONTROLS}]*$`;
/** How a value refused by PRINTABLE_TEXT_PATTERN is told (a pattern's error is said in its description). */
export const PRINTABLE_TEXT = 'no control characters';
/**
 * Characters that print as nothing (Unicode's default-ignorable code points: the soft hyphen, the zero-width space
 * and joiners, the bidirectional marks, the word joiner, the byte order mark, fillers, variation selectors, tags).
 * In a label they make one that prints as another (probe: `general\u200b` opened a second account beside `general`,
 * with its own deposit address; review: so did `general\u200e`, `general\u3164`). Patterns are compiled as
 * Unicode expressions (ajv's default), which know the property.
 */
const INVISIBLE = '\\p{Default_Ignorable_Code_Point}';
/**
 * What prints: a character that is no space, no invisible one, no Braille blank (U+2800, which prints as a space) and
 * no combining mark, which only marks another (probe: "\u2800" and marks alone were taken as a name).
 */
const PRINTING = `[^\\s${INVISIBLE}\\u2800\\p{M}]`;
/**
 * A name or an address line: PRINTABLE_TEXT with something to print (probe: a first name, a city or a signature of
 * one space was taken, and shown as the participant's name).
 */
export const NAME_TEXT_PATTERN = `^(?=.*${PRINTING})[^${ONE_LINE_CONTROLS}]*$`;
export const NAME_TEXT = 'not blank; no control characters';
/**
 * An identifier written as it prints (a booked trade's `client_trade_id`): no control or invisible character anywhere,
 * no space at either end, spaces inside allowed. Review: a BEL and a right-to-left override were booked, and a
 * zero-width space would make two ids that print alike. Postal codes have a narrower form of their own
 * (participants.schemas.ts).
 */
export const VISIBLE_TEXT_PATTERN = `^(?!\\s)[^${ONE_LINE_CONTROLS}${INVISIBLE}]*(?<!\\s)$`;
export const VISIBLE_TEXT = 'no control or invisible characters, no space at either end';
/**
 * As PRINTABLE_TEXT_PATTERN, for free text written in a text box: tab, line feed and carriage return allowed, and
 * something to print among them (probe: an explanation of three spaces met "required when purpose_of_transactions
 * is other").
 */
export const MULTILINE_TEXT_PATTERN = `^(?=[\\s\\S]*${PRINTING})[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F${OTHER_CONTROLS}]*$`;
export const MULTILINE_TEXT = 'not blank; no control characters but line breaks and tabs';

/**
 * An account label where one is named for an account to hold or move balances (quotes, trades, funding,
 * customer accounts, the operator's balances and trades): at most 40 characters, the vendor's bound on a
 * trade party's `account_label` (TradeResponseEntity) and a fund quote's (PostFundRfqBody). A longer one,
 * taken at 100 before, made trades whose objects (and `trade_status_changed` payloads) broke the vendor's
 * schema. Filters keep a looser bound (a longer one only matches nothing), and so does the operator's balance
 * adjustment, so that balances recorded under a longer label before stay within reach.
 */
/** How a label refused by AccountLabel's pattern is told. */
export const ACCOUNT_LABEL_FORM = VISIBLE_TEXT;
// No space at either end either: `general ` too was another account than `general` (probe).
/**
 * A character of a label: printable and visible, or the emoji presentation selector or zero-width joiner right after
 * an emoji (`❤️`, `👩‍💻`), where they are part of the emoji drawn (review: `savings ❤️` was refused).
 */
const LABEL_CHARACTER = `(?:[^${ONE_LINE_CONTROLS}${INVISIBLE}]|(?<=\\p{Extended_Pictographic})[\\uFE0F\\u200D])`;
const ACCOUNT_LABEL_PATTERN = `^(?!\\s)${LABEL_CHARACTER}+(?<!\\s)$`;
export const MAX_ACCOUNT_LABEL_LENGTH = 40;
export const AccountLabel = Type.String({
  minLength: 1,
  maxLength: MAX_ACCOUNT_LABEL_LENGTH,
  pattern: ACCOUNT_LABEL_PATTERN,
  description: ACCOUNT_LABEL_FORM,
});
const accountLabelRegExp = new RegExp(ACCOUNT_LABEL_PATTERN, 'u');
/** Whether `label` is one AccountLabel takes (its length in code points, as the schema counts it). */
export function isAccountLabel(label: string): boolean {
  return [...label].length <= MAX_ACCOUNT_LABEL_LENGTH && accountLabelRegExp.test(label);
}

export const Accepted = Type.Object({}, { additionalProperties: false, description: 'Accepted for later' });
/** The query string of a route that takes no parameter: any is refused by name. */
export const NoQuery = Type.Object({}, { additionalProperties: false });
/** The body of an action that takes none: a bare request or `{}` (with bareBodyAsEmpty), any field refused by name. */
export const NoFieldsBody = Type.Object({}, { additionalProperties: false, description: 'no fields' });

export const Error400 = Type.Object({ errors: Type.Array(Type.String()) });
export const Error401 = Type.Object({ error: Type.String() });
export const Error403 = Type.Object({ error: Type.Literal(true), message: Type.String() });
export const Error404 = Type.Object({ error: Type.String() });
/**
 * The operator API's 404 and 503: the public API's body, and the domain's words when it said more than the status
 * (what was not found, why the service is unavailable).
 */
export const OperatorError = Type.Object({ error: Type.String(), message: Type.Optional(Type.String()) });
export const Error409 = Type.Object({ errors: Type.Array(Type.String()) });
export const Error429 = Type.Object({ error: Type.String() });
export const Error500 = Type.Object({ error: Type.String() });
export const Error503 = Type.Object({ error: Type.String() });

export const Error413 = Type.Object({ errors: Type.Array(Type.String()) });

export const Error502 = Type.Object({ error: Type.String() });
export const Error504 = Type.Object({ error: Type.String() });

/**
 * wire-contract §2.1: a caller whose address is on no platform's allow-list is refused at the edge, before its
 * credentials are read, with this text: on every public route, the unauthenticated ones too, and the first
 * answer a new deployment gives (until a platform exists).
 */
const FirewallRefusal = Type.String({
  const: FIREWALL_REFUSAL_TEXT,
  description: 'wire-contract §2.1: refused at the edge (the address is on no allow-list)',
});
/**
 * The error responses of the public routes that take no credentials (GET /time, the JWKS): a target that cannot be
 * read (a `#`, bad percent-encoding), the firewall's 403 and the rate limit's 429.
 */
export const openRouteErrorResponses = {
  400: Error400,
  403: { description: 'refused at the edge', content: { 'text/plain': { schema: FirewallRefusal } } },
  429: Error429,
};

/**
 * The error responses every authenticated public route can give; routes spread this into `response` (with
 * {@link conflictResponses} when they can refuse a repeat), so that /docs/json lists what each route answers,
 * not what some other route does. A 403 is the firewall's text, or the allow-list's or ownership's JSON. Every
 * route reads a body (a GET's is signed), so a body over the limit (1 MiB) is a 413 on each. 502 and 504: a
 * write whose outcome is unknown (its connection lost after the commit, spec 7.1.2), and the simulator's
 * rehearsals in cert (`X-Simulator-Scenario`).
 */
export const publicErrorResponses = {
  400: Error400,
  401: Error401,
  403: {
    description: "the firewall's refusal (text), or the allow-list's or the resource owner's (JSON)",
    content: {
      'application/json': { schema: Error403 },
      'text/plain': { schema: FirewallRefusal },
    },
  },
  404: Error404,
  413: Error413,
  429: Error429,
  500: Error500,
  502: Error502,
  503: Error503,
  504: Error504,
};

/**
 * The routes that refuse a repeat, or a state they cannot apply to (an account's pair taken, a tenant already
 * added, a customer whose creation is in flight): wire-contract §9's 409.
 */
export const conflictResponses = { 409: Error409 };

/** Bounded so that page × page_size stays a valid OFFSET (a page of 1e20 failed in PostgreSQL as a 500). */
export const PageParam = Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 });

/** The latest epoch ms a parameter may name: what a timestamptz holds and JavaScript prints (year 9999). */
export const MAX_EPOCH_MS = 253_402_300_799_999;

/**
 * Epoch milliseconds in a range filter, where the vendor types them `number`: a fraction is taken too (a client
 * that computes `time.time() * 1000` sends one), and bounds the range exactly.
 */
export const EpochMsFilterParam = Type.String({
  // Read as text (every query value is), so that its fraction is read exactly, never as a double. No number
  // branch: the query validator coerces, and a value the pattern refused (`1e-7`, `0x10`, a space) came
  // through it as a number that the bound then misread or failed on with a 500 (review).
  // With an exponent too, as GET /trades takes its timestamps: many clients print a number so (Go's %g, probe).
  pattern: '^[0-9]{1,15}(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?$',
  // The bounds are said (probe: `1796687114797000e-3`, 16 digits, was refused as "not in the expected form" by a
  // message that described a form it had).
  description:
    'epoch milliseconds: up to 15 digits, then optionally a fraction of up to 20 digits and an exponent of up to 2',
});

/** Epoch milliseconds a body gives (an operator's deposit time): bounded to what a timestamptz can hold (year 9999). */
export const EpochMsParam = Type.Integer({
  // 13 digits at least (from 2001-09-09): a time in seconds, as the API's X-SCX-TIMESTAMP is written, was taken
  // as milliseconds and recorded a deposit made in January 1970.
  minimum: 1_000_000_000_000,
  maximum: MAX_EPOCH_MS,
  description: 'epoch milliseconds (13 digits; not seconds)',
});

export const PageQuery = {
  page: Type.Optional(PageParam),
  page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
};
