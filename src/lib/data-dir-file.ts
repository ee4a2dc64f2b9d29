import { constants, existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { access, link, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The data dir could not be made or written: the message names the directory and why, in place of node's
 * own (a recursive mkdir on a read-only file system reads "ENOENT: no such file or directory", review).
 */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

const WRITE_PROBLEMS: Record<string, string> = {
  EROFS: 'it is on a read-only file system',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'the disk quota is used up',
  ENOTDIR: 'a part of the path is a file, not a directory',
};

/** Why `dir` could not be made: what the nearest existing directory above it refuses. */
async function whyNotMade(dir: string, error: NodeJS.ErrnoException): Promise<string> {
  let existing = path.dirname(dir);
  while (!existsSync(existing) && existing !== path.dirname(existing)) existing = path.dirname(existing);
  const isDir = await stat(existing).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) return `${existing} is not a directory`;
  try {
    await access(existing, constants.W_OK);
  } catch (refusal) {
    const code = (refusal as NodeJS.ErrnoException).code ?? '';
    if (code === 'EROFS') return `${existing} is on a read-only file system`;
    return `${existing} is not writable by this user (uid ${process.getuid?.() ?? '?'})`;
  }
  return WRITE_PROBLEMS[error.code ?? ''] ?? error.message;
}

/** Makes the data dir (and its parents) if it is not there; DataDirError saying why it cannot be made. */
export async function makeDataDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    throw new DataDirError(`cannot create ${dir}: ${await whyNotMade(dir, error as NodeJS.ErrnoException)}`, {
      cause: error,
    });
  }
}

/**
 * A value kept in a file of the data dir (a generated secret, the embedded cluster's password): read when
 * the file exists, else made, written (owner-only) and returned. Written whole or not at all, since a crash
 * mid-write would leave a truncated value for the next start to read: to a file of its own, then linked to
 * the name, which fails if the name exists: two first starts at once both made a value and the last rename won,
 * so one of them went on with a value the file no longer held (the cluster's password: every later start then
 * failed to log in, review). The one that loses reads the winner's.
 */
export async function readOrCreate(file: string, make: () => string): Promise<string> {
  const read = async () => {
    try {
      return (await readFile(file, 'utf8')).trim();
    } catch (error) {
      // Node's own named no file ("EISDIR: illegal operation on a directory, read", probe).
      const code = (error as NodeJS.ErrnoException).code ?? '';
      const problem = code === 'EISDIR' ? 'it is a directory, not a file' : WRITE_PROBLEMS[code];
      if (!problem) throw error;
      throw new DataDirError(`cannot read ${file}: ${problem}`, { cause: error });
    }
  };
  if (existsSync(file)) return read();
  const value = make();
  const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(partial, value + '\n', { mode: 0o600 });
    try {
      await link(partial, file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return await read();
      // A file system without hard links: replaced whole, as before (the race above stays possible there).
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS') throw error;
      await rename(partial, file);
    }
    return value;
  } catch (error) {
    const problem = WRITE_PROBLEMS[(error as NodeJS.ErrnoException).code ?? ''];
    if (!problem) throw error;
    throw new DataDirError(`cannot write ${file}: ${problem}`, { cause: error });
  } finally {
    await rm(partial, { force: true });
  }
}
