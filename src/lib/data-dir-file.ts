import { existsSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';

/**
 * A value kept in a file of the data dir (a generated secret, the embedded cluster's password): read when
 * the file exists, else made, written (owner-only) and returned. Written whole or not at all, since a crash
 * mid-write would leave a truncated value for the next start to read: to a file of its own, then renamed
 * over the name.
 */
export async function readOrCreate(file: string, make: () => string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const value = make();
  const partial = `${file}.${process.pid}.tmp`;
  await writeFile(partial, value + '\n', { mode: 0o600 });
  await rename(partial, file);
  return value;
}
