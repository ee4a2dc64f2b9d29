import assert from 'node:assert/strict';
import { test } from 'node:test';
import { portablePattern, withPortablePatterns } from '../../src/http/portable-patterns.ts';

/** Strings on which a pattern written for Unicode mode and its portable form must agree. */
const SAMPLES = [
  '',
  'general',
  'N 12d 30m 15',
  'N\u00a012d\u00a030m\u00a015',
  'N\t12d\u200030m\ufeff15',
  'N\u001c12d 30m 15',
  '12.5',
  '١٢',
  '３',
  '𝟙𝟚',
  'a\u0000b',
  'tab\there',
  'x\u0085y',
  'x\u202ey',
  'x\u2028y',
  'café ☕ 日本',
  '👩‍💻',
  ']',
  '-',
  '\\',
  'aa0',
  '\u0000' + '1',
  '\u0001',
  '😀😀',
  'ab😀',
  '\r',
  'x\ry',
  '\u2029',
  'abc',
];

test('\\d, \\s and \\uXXXX are written in the subset every engine reads alike, matching as the service does', () => {
  for (const pattern of [
    '^\\d{1,3}(\\.\\d+)?$',
    '^(([NSEW])\\s+(\\d+(?:\\.\\d+)?)d\\s+(\\d+(?:\\.\\d+)?)m\\s+(\\d+(?:\\.\\d+)?)|(-?\\d+(?:\\.\\d+)?))$',
    '^[^\\u0000-\\u001F\\u007F-\\u009F\\u202A-\\u202E\\u2066-\\u2069\\u2028\\u2029]*$',
    '^[^\\s\\d]+$',
    '^[\\u005D\\u002D\\u005C]$',
    '^[\\x21-\\x7E]+$',
    // A character written as itself would join the escape before it (review: `\\1\\u0030` became `\\10`).
    '^(a)\\1\\u0030$',
    '^\\0\\u0031$',
    // Repeated without bound, a `.` or a negated class reads a character beyond U+FFFF as two alike.
    '^[^<>]+$',
    '^.*$',
    '^x.+y$',
  ]) {
    const portable = portablePattern(pattern);
    assert.ok(portable !== undefined, pattern);
    assert.doesNotMatch(portable, /\\[dDsSwWbBpP]|\\u/, portable);
    for (const sample of SAMPLES)
      assert.equal(
        new RegExp(portable).test(sample),
        new RegExp(pattern, 'u').test(sample),
        `${JSON.stringify(pattern)} → ${JSON.stringify(portable)} on ${JSON.stringify(sample)}`,
      );
  }
  assert.equal(portablePattern('^[^\\u0000-\\u001F]*$'), '^[^\\x00-\\x1F]*$');
  assert.equal(portablePattern('^.*$'), '^[^\\n\\r\u2028\u2029]*$');
  assert.equal(
    portablePattern('^[A-Z0-9]{1,12}(\\.[A-Z0-9]{1,12})?$'),
    '^[A-Z0-9]{1,12}(\\.[A-Z0-9]{1,12})?$',
  );
});

test('a pattern only Unicode mode reads is not published as a pattern; the original is left as it was', () => {
  for (const pattern of [
    '^\\p{L}+$',
    '^(?!\\s).*$',
    '^(?<=a)b$',
    '^\\w+$',
    '\\bword\\b',
    '^[\\uD83D\\uDE00]$',
    '^\\u{1F600}$',
  ])
    assert.equal(portablePattern(pattern), undefined, pattern);
  const label = { type: 'string', pattern: '^(?!\\s)\\p{L}+$', description: 'letters' };
  const document = {
    paths: { '/x': { get: { parameters: [{ schema: label }, { schema: { pattern: '^\\d$' } }] } } },
  };
  const published = withPortablePatterns(document);
  assert.deepEqual(published.paths['/x'].get.parameters, [
    { schema: { type: 'string', 'x-svc-unicode-pattern': '^(?!\\s)\\p{L}+$', description: 'letters' } },
    { schema: { pattern: '^[0-9]$' } },
  ]);
  assert.equal(label.pattern, '^(?!\\s)\\p{L}+$', 'the route schema is not changed');
  assert.equal(document.paths['/x'].get.parameters[1]!.schema.pattern, '^\\d$');
});
