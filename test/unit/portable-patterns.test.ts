import assert from 'node:assert/strict';
import { test } from 'node:test';
import { portablePattern, withPortablePatterns } from '../../src/http/portable-patterns.ts';

/** Strings on which a pattern written for Unicode mode and its portable form must agree. */
const SAMPLES = [
  '',
  'a',
  'ab',
  'abc',
  'general',
  'N 12d 30m 15',
  'N\u00a012d\u00a030m\u00a015',
  'N\t12d\u200030m\ufeff15',
  'N\u001c12d 30m 15',
  '12.5',
  '0',
  '00',
  '١٢',
  '３',
  '𝟙𝟚',
  'a\u0000b',
  'tab\there',
  'x\u0085y',
  'x\u202ey',
  'x\u2028y',
  'café ☕ 日本',
  '😀',
  '😀😀',
  'ab😀',
  'a😀b',
  '👩‍💻',
  ']',
  '-',
  '\\',
  '&',
  'aa0',
  '\u0000' + '1',
  '\u0001',
  '\r',
  'x\ry',
  '\u2029',
  '<a>',
  'a,b;c',
  'A',
];

/** Whether `portable`, read without the `u` flag, matches every sample as `pattern` does in Unicode mode. */
function assertAlike(pattern: string, portable: string) {
  // Still a pattern in Unicode mode, which ajv and the service read (review: `\~` is none there).
  assert.doesNotThrow(() => new RegExp(portable, 'u'), portable);
  for (const sample of SAMPLES)
    assert.equal(
      new RegExp(portable).test(sample),
      new RegExp(pattern, 'u').test(sample),
      `${JSON.stringify(pattern)} → ${JSON.stringify(portable)} on ${JSON.stringify(sample)}`,
    );
}

test('\\d, \\s, . and \\uXXXX are written in the subset every engine reads alike, matching as the service does', () => {
  for (const pattern of [
    '^\\d{1,3}(\\.\\d+)?$',
    '^(([NSEW])\\s+(\\d+(?:\\.\\d+)?)d\\s+(\\d+(?:\\.\\d+)?)m\\s+(\\d+(?:\\.\\d+)?)|(-?\\d+(?:\\.\\d+)?))$',
    '^[^\\u0000-\\u001F\\u007F-\\u009F\\u202A-\\u202E\\u2066-\\u2069\\u2028\\u2029]*$',
    '^[\\s\\d]+$',
    '^[\\u005D\\u002D\\u005C]$',
    '^[\\x21-\\x7E]+$',
    '^[A-Z0-9]{1,12}(\\.[A-Z0-9]{1,12})?$',
    '^\\+?[0-9][0-9 ()-]{5,23}[0-9]$',
    // One `.` or negated class, outside groups, repeated without bound: a character beyond U+FFFF is taken whole.
    '^[^<>]+$',
    '^.*$',
    '^x.+y$',
    'a[^b]*',
  ]) {
    const portable = portablePattern(pattern);
    assert.ok(portable !== undefined, pattern);
    assert.doesNotMatch(portable, /\\[dDsSwWbBpPuck0-9]/, portable);
    assertAlike(pattern, portable);
  }
  assert.equal(portablePattern('^[^\\u0000-\\u001F]*$'), '^[^\\x00-\\x1F]*$');
  assert.equal(portablePattern('^.*$'), '^[^\\n\\r\u2028\u2029]*$');
  assert.equal(portablePattern('^[&&-]$'), '^[\\x26\\x26\\-]$');
  assert.equal(portablePattern('^[!-~]+$'), '^[!-\\x7E]+$');
  // Review: a `[` ending a range opened a nested class in Java; Go reads `{02}` as text.
  assert.equal(portablePattern('[[-a]'), '[\\[-a]');
  assert.equal(portablePattern('[!-[]'), '[!-\\[]');
  assert.equal(portablePattern('^a{02}$'), '^a{2}$');
  assert.equal(portablePattern('^a{0,010}?$'), '^a{0,10}?$');
});

test('a pattern not read alike everywhere is not published as a pattern', () => {
  for (const pattern of [
    '^\\p{L}+$',
    '^(?!\\s).*$',
    '^(?<=a)b$',
    '^\\w+$',
    '\\bword\\b',
    '^[\\uD83D\\uDE00]$',
    '^\\u{1F600}$',
    '^😀{2}$',
    // Review: `.` or a negated class bounded, twice, or in a repeated group counts a character beyond U+FFFF as two.
    '^.{1,3}$',
    '^.{2,}$',
    '^[^<>]{1,3}$',
    '^[^<>]{2,}$',
    '^a[^b]c$',
    '^.+.+$',
    '^[^,]+[^;]+$',
    '^(?:.+){2}$',
    '^(.+)(.+)$',
    // A range across U+D800-U+DFFF takes half such a character without the flag.
    '^[\\u0020-\\uFFFF]+$',
    '^[\\u0021-\\uFFFD]*$',
    // Back-references: Go has none, Python refuses or reads some otherwise.
    '^(a)\\1\\u0030$',
    '^(a\\1)$',
    '^(?:(a)|b)\\1$',
    '^\\0\\u0031$',
    // Review: Python's re refuses these.
    '^\\cJ$',
    '^[^]$',
    '^a[]?$',
    '^(?<y>[0-9]{4})-\\k<y>$',
    // Review: counts past Go's 1,000; an anchor in a repeated group, which Java reads otherwise.
    '^a{1001}$',
    '^a{2,4294967295}$',
    '(?:a|^){2}$',
    // Review: Go bounds the product of nested counts.
    '^(?:a{2}){501}$',
    '^(a(?:b{10})){101}$',
    '^(?:^\\r?){2}\\n*$',
  ])
    assert.equal(portablePattern(pattern), undefined, pattern);
});

test('whatever pattern it keeps matches as the original does in Unicode mode (differential, seeded)', () => {
  const atoms = [
    'a',
    'b',
    '0',
    '😀',
    '\\d',
    '\\s',
    '.',
    '[^<>]',
    '[a-z]',
    '[^,]',
    '[\\u0020-\\uFFFF]',
    '\\u0030',
  ];
  const quantifiers = ['', '', '*', '+', '?', '{2}', '{2,}', '{1,3}', '+?'];
  // mulberry32, seeded: the same patterns every run.
  let seed = 43;
  const random = (n: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  let kept = 0;
  for (let round = 0; round < 3_000; round += 1) {
    let body = '';
    for (let k = 1 + random(3); k > 0; k -= 1) {
      const atom = atoms[random(atoms.length)]! + quantifiers[random(quantifiers.length)]!;
      body += random(5) === 0 ? `(?:${atom})${quantifiers[random(quantifiers.length)]!}` : atom;
    }
    const pattern = `${random(4) ? '^' : ''}${body}${random(4) ? '$' : ''}`;
    try {
      new RegExp(pattern, 'u');
    } catch {
      continue;
    }
    const portable = portablePattern(pattern);
    if (portable === undefined) continue;
    kept += 1;
    assertAlike(pattern, portable);
  }
  assert.ok(kept > 500, `only ${kept} patterns kept`);
});

test('the document is changed on a copy: the route schemas keep their patterns', () => {
  const label = { type: 'string', pattern: '^(?!\\s)\\p{L}+$', description: 'letters' };
  const document = {
    paths: { '/x': { get: { parameters: [{ schema: label }, { schema: { pattern: '^\\d$' } }] } } },
  };
  const published = withPortablePatterns(document);
  assert.deepEqual(published.paths['/x'].get.parameters, [
    { schema: { type: 'string', 'x-svc-unicode-pattern': '^(?!\\s)\\p{L}+$', description: 'letters' } },
    { schema: { pattern: '^[0-9]$' } },
  ]);
  assert.equal(label.pattern, '^(?!\\s)\\p{L}+$');
  assert.equal(document.paths['/x'].get.parameters[1]!.schema.pattern, '^\\d$');
});
