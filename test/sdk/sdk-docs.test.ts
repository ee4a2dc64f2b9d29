import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import * as sdk from 'svc-platform/sdk';
import ts from 'typescript';

/**
 * Issue 9 point 1 and STYLE.md: every method the SDK exports (`svc-platform/sdk`: its functions, and the
 * public methods of its classes) has a doc comment with an `@example`.
 */
const SDK = path.resolve(import.meta.dirname, '../../src/sdk');
const FILES = [
  ...readdirSync(path.join(SDK, 'resources')).map((f) => path.join(SDK, 'resources', f)),
  ...['platform.ts', 'client.ts', 'webhook-verify.ts'].map((f) => path.join(SDK, f)),
];

/** Exported by the module and by the package's entry point. */
function isExported(node: ts.Node, name: string): boolean {
  const exported = (ts.getCombinedModifierFlags(node as ts.Declaration) & ts.ModifierFlags.Export) !== 0;
  return exported && name in sdk;
}

function hasExample(node: ts.Node): boolean {
  return ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'example');
}

test('every exported SDK method and function has a doc comment with an @example', () => {
  const missing: string[] = [];
  let checked = 0;
  for (const file of FILES) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const where = (name: string) => `${path.relative(SDK, file)}: ${name}`;
    for (const statement of source.statements) {
      if (
        ts.isFunctionDeclaration(statement) &&
        statement.name &&
        isExported(statement, statement.name.text)
      ) {
        checked++;
        if (!hasExample(statement)) missing.push(where(statement.name.text));
      }
      if (ts.isClassDeclaration(statement) && statement.name && isExported(statement, statement.name.text)) {
        for (const member of statement.members) {
          if (!ts.isMethodDeclaration(member) || !member.name || !ts.isIdentifier(member.name)) continue;
          const modifiers = ts.getCombinedModifierFlags(member);
          if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
          checked++;
          if (!hasExample(member)) missing.push(where(`${statement.name.text}.${member.name.text}`));
        }
      }
    }
  }
  assert.ok(checked >= 29, `found the SDK's methods (${checked})`);
  assert.deepEqual(missing, []);
});
