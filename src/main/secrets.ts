import { generateKeyPairSync, randomBytes } from 'node:crypto';
import path from 'node:path';
import { adminTokenProblem, ConfigError, jwtSigningKeyPem, type Config } from '../config.ts';
import { makeDataDir, readOrCreate } from '../lib/data-dir-file.ts';

/**
 * The three server secrets: the operator token, the key that encrypts API secrets at rest, and the JWT
 * signing key. Taken from config when set (required for several instances, so all agree); otherwise
 * generated once and kept in the data dir, which is what a single laptop instance wants.
 */
export interface ServerSecrets {
  adminToken: string;
  secretKey: Buffer;
  jwtPrivateKeyPem: string;
  /** Names of the secrets that came from the data dir rather than config. */
  fromDataDir: string[];
}

export async function resolveSecrets(config: Readonly<Config>): Promise<ServerSecrets> {
  const fromDataDir: string[] = [];
  const needsDir = !config.adminToken || !config.secretKey || !config.jwtPrivateKey;
  if (needsDir) await makeDataDir(config.dataDir);
  const fromDir = async (name: string, file: string, make: () => string) => {
    fromDataDir.push(name);
    return readOrCreate(path.join(config.dataDir, file), make);
  };
  // A file put in the data dir by hand (or damaged) is checked as the setting it stands for would be: a bad
  // one stops the start, naming the file, rather than failing every request that needs it.
  const adminToken =
    config.adminToken ??
    (await fromDir('SVC_ADMIN_TOKEN', 'admin-token', () => randomBytes(24).toString('base64url')));
  const tokenProblem = adminTokenProblem(adminToken);
  if (tokenProblem)
    throw new ConfigError(
      `${path.join(config.dataDir, 'admin-token')}: ${tokenProblem.rule} (remove it to have one made)`,
    );
  const secretKey =
    config.secretKey ??
    (await fromDir('SVC_SECRET_KEY', 'secret-key', () => randomBytes(32).toString('base64')));
  if (Buffer.from(secretKey, 'base64').length !== 32)
    throw new ConfigError(
      `${path.join(config.dataDir, 'secret-key')}: must be base64 of exactly 32 bytes (it encrypts the API secrets stored: restore the one they were made with)`,
    );
  // Config has already normalised SVC_JWT_PRIVATE_KEY to PKCS#8; a key file put in the data dir by hand is
  // checked and normalised the same way.
  const jwtPrivateKeyPem =
    config.jwtPrivateKey ??
    jwtSigningKeyPem(
      path.join(config.dataDir, 'jwt-private-key.pem'),
      await fromDir('SVC_JWT_PRIVATE_KEY', 'jwt-private-key.pem', () =>
        generateKeyPairSync('ec', { namedCurve: 'P-256' })
          .privateKey.export({ type: 'pkcs8', format: 'pem' })
          .toString(),
      ),
    );
  return { adminToken, secretKey: Buffer.from(secretKey, 'base64'), jwtPrivateKeyPem, fromDataDir };
}
