import assert from 'node:assert/strict';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  checkServing,
  ConfigError,
  publicListenerExposures,
  jwtSigningKeyPem,
  loadConfig,
  MAX_RETRY_DELAY_MS,
  SETTINGS,
} from '../../src/config.ts';
import { PROJECT_ROOT } from '../helpers/service-process.ts';

/**
 * README "Configuration": every setting is validated by loadConfig, and a bad value stops the start with a
 * ConfigError naming the setting, before anything (migrations, listeners) has run.
 */
function refused(env: Record<string, string>, pattern: RegExp): void {
  assert.throws(
    () => loadConfig({ SVC_DATA_DIR: '/tmp/unused', ...env }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, `a ConfigError, not ${String(error)}`);
      assert.match(error.message, pattern);
      return true;
    },
  );
}

describe('trusted proxies', () => {
  test('SVC_TRUST_PROXY takes CIDRs, but not one that trusts every address', () => {
    assert.deepEqual(
      loadConfig({ SVC_TRUST_PROXY: '10.0.0.0/8, fd00::/8, ::ffff:10.0.0.0/104' }).trustProxy,
      ['10.0.0.0/8', 'fd00::/8', '::ffff:10.0.0.0/104'],
    );
    refused({ SVC_TRUST_PROXY: '10.0.0.0/33' }, /^SVC_TRUST_PROXY: "10.0.0.0\/33" is not a CIDR/);
    // A zone id node accepts and the proxy parser read at start does not: refused here, named (review).
    refused({ SVC_TRUST_PROXY: 'fe80::1%br-lan' }, /^SVC_TRUST_PROXY: "fe80::1%br-lan" is not a CIDR/);
    // ::ffff:0.0.0.0/96 is every IPv4 address written as IPv6 (proxy-addr trusts every IPv4 peer with it).
    // Any wider IPv6 range over it too (::/80), and every address in pieces.
    for (const everyone of [
      '0.0.0.0/0',
      '::/0',
      '::ffff:0.0.0.0/96',
      '::ffff:0:0/96',
      '::/80',
      '::ffff:0:0/95',
    ])
      refused({ SVC_TRUST_PROXY: `10.0.0.0/8,${everyone}` }, /^SVC_TRUST_PROXY: ".*" trusts every address/);
    refused(
      { SVC_TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1' },
      /^SVC_TRUST_PROXY: together trusts every IPv4 address/,
    );
  });
});

describe('ports and listeners', () => {
  test('a port above 65535 is refused, naming the setting', () => {
    refused({ SVC_PORT: '99999' }, /^SVC_PORT: "99999" is not a port number/);
    refused({ SVC_ADMIN_LISTEN: '127.0.0.1:99999' }, /^SVC_ADMIN_LISTEN: "99999" is not a port number/);
    refused({ SVC_OPS_LISTEN: '0.0.0.0:65536' }, /^SVC_OPS_LISTEN: /);
    refused({ SVC_PORT: '-1' }, /^SVC_PORT: /);
  });

  test('0 (any free port) and 65535 are ports', () => {
    assert.equal(loadConfig({ SVC_PORT: '0' }).listen.port, 0);
    assert.deepEqual(loadConfig({ SVC_ADMIN_LISTEN: '127.0.0.1:65535' }).adminListen, {
      host: '127.0.0.1',
      port: 65535,
    });
  });

  test('an IPv6 host is written in brackets, and read without them', () => {
    assert.deepEqual(loadConfig({ SVC_ADMIN_LISTEN: '[::1]:18483' }).adminListen, {
      host: '::1',
      port: 18483,
    });
    assert.deepEqual(loadConfig({ SVC_OPS_LISTEN: '[::]:9090' }).opsListen, { host: '::', port: 9090 });
    refused({ SVC_ADMIN_LISTEN: '::1:18483' }, /^SVC_ADMIN_LISTEN: "::1:18483" is not host:port .*\[::1\]/);
    refused({ SVC_ADMIN_LISTEN: 'localhost' }, /^SVC_ADMIN_LISTEN: /);
    refused({ SVC_ADMIN_LISTEN: '[::1]:' }, /^SVC_ADMIN_LISTEN: /);
  });

  test('a host is an IP address or a host name, else refused naming the setting', () => {
    for (const host of ['127.0.0.1', '0.0.0.0', '::', '::1', 'localhost', 'api-1.internal']) {
      assert.equal(loadConfig({ SVC_HOST: host }).listen.host, host);
    }
    assert.equal(loadConfig({ SVC_OPS_LISTEN: 'metrics.internal:9090' }).opsListen?.host, 'metrics.internal');
    refused({ SVC_HOST: '999.1.1.1' }, /^SVC_HOST: "999\.1\.1\.1" is neither an IP address nor a host name/);
    refused({ SVC_HOST: 'my host' }, /^SVC_HOST: /);
    refused({ SVC_ADMIN_LISTEN: ' 127.0.0.1:18162' }, /^SVC_ADMIN_LISTEN: " 127\.0\.0\.1" is neither/);
    refused({ SVC_OPS_LISTEN: 'bad_host:9090' }, /^SVC_OPS_LISTEN: /);
  });

  test("the operator listener cannot take the public listener's address", () => {
    refused(
      { SVC_PORT: '18480', SVC_ADMIN_LISTEN: '127.0.0.1:18480' },
      /^SVC_ADMIN_LISTEN: 127\.0\.0\.1:18480 is the public listener's address/,
    );
    refused(
      { SVC_HOST: '0.0.0.0', SVC_PORT: '18480', SVC_ADMIN_LISTEN: '10.0.0.1:18480' },
      /^SVC_ADMIN_LISTEN:/,
    );
    // Another port, or "any free port" on both, is fine.
    assert.ok(loadConfig({ SVC_PORT: '18480', SVC_ADMIN_LISTEN: '127.0.0.1:18481' }).adminListen);
    assert.ok(loadConfig({ SVC_PORT: '0', SVC_ADMIN_LISTEN: '127.0.0.1:0' }).adminListen);
  });
});

describe('log level and URLs', () => {
  test("the log level is one of pino's", () => {
    refused({ SVC_LOG_LEVEL: 'verbose' }, /^SVC_LOG_LEVEL: must be one of fatal, error, warn, info, debug/);
    assert.equal(loadConfig({ SVC_LOG_LEVEL: 'silent' }).logLevel, 'silent');
    assert.equal(loadConfig({}).logLevel, 'info');
  });

  test('DATABASE_URL and REDIS_URL must be URLs of their kind; the value (a password) is not repeated', () => {
    refused({ DATABASE_URL: 'notaurl' }, /^DATABASE_URL: not a URL; expected one like postgres:\/\//);
    refused(
      { DATABASE_URL: 'mysql://u:hunter2@db/x' },
      /^DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/,
    );
    refused({ REDIS_URL: 'localhost:6379' }, /^REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/);
    // The path names the database: ioredis dropped `/abc` with a warning and used database 0 (review).
    refused({ REDIS_URL: 'redis://cache:6379/abc' }, /^REDIS_URL: the path names the database, a number/);
    refused({ REDIS_URL: 'redis://cache:6379/1/2' }, /^REDIS_URL: the path names the database/);
    refused({ REDIS_URL: 'redis://cache:6379?db=abc' }, /^REDIS_URL: db names the database, one number/);
    refused({ REDIS_URL: 'redis://cache:6379?db=1&db=abc' }, /^REDIS_URL: db names the database, one number/);
    assert.equal(loadConfig({ REDIS_URL: 'redis://cache:6379/5' }).redisUrl, 'redis://cache:6379/5');
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'mysql://u:hunter2@db/x' }),
      (e: Error) => !/hunter2/.test(e.message),
    );
    const config = loadConfig({
      DATABASE_URL: 'postgresql://u:p@db:5432/x',
      REDIS_URL: 'rediss://cache:6380',
    });
    assert.equal(config.databaseUrl, 'postgresql://u:p@db:5432/x');
    assert.equal(config.redisUrl, 'rediss://cache:6380');
  });

  test("DATABASE_URL's TLS settings, read as pg reads them: an sslmode it knows, files it can read", async () => {
    // pg turned TLS on for an sslmode it does not know, and a missing file failed the first connection with node's
    // "ENOENT: no such file or directory, open '…'", naming no setting (probe).
    const url = (query: string) => `postgres://u:p@db:5432/x?${query}`;
    const modes = 'disable, prefer, require, verify-ca, verify-full, no-verify';
    refused(
      { DATABASE_URL: url('sslmode=bogus') },
      new RegExp(`^DATABASE_URL: sslmode must be one of ${modes}, not "bogus"$`),
    );
    // pg takes the last of a repeated parameter (review: the first was checked).
    refused({ DATABASE_URL: url('sslmode=disable&sslmode=bogus') }, /not "bogus"$/);
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-config-tls-'));
    try {
      const cert = path.join(dir, 'client.crt');
      const missing = path.join(dir, 'missing.pem');
      writeFileSync(cert, 'not checked here: pg reads it');
      for (const name of ['sslcert', 'sslkey', 'sslrootcert']) {
        refused(
          { DATABASE_URL: url(`${name}=${missing}`) },
          new RegExp(`^DATABASE_URL: ${name} ${missing} does not exist$`),
        );
        refused(
          { DATABASE_URL: url(`${name}=${dir}`) },
          new RegExp(`^DATABASE_URL: ${name} ${dir} is a directory, not a file$`),
        );
        refused({ DATABASE_URL: url(`${name}=${cert}&${name}=${missing}`) }, /missing\.pem does not exist$/);
        assert.equal(
          loadConfig({ DATABASE_URL: url(`${name}=${cert}`) }).databaseUrl,
          url(`${name}=${cert}`),
        );
      }
      // With a space in the URL, pg encodes it whole first: an encoded path is then read as written, encoded.
      const encoded = encodeURIComponent(cert);
      assert.equal(
        loadConfig({ DATABASE_URL: url(`sslrootcert=${encoded}`) }).databaseUrl,
        url(`sslrootcert=${encoded}`),
      );
      refused(
        { DATABASE_URL: url(`sslrootcert=${encoded}&application_name=a b`) },
        /^DATABASE_URL: sslrootcert %2F.* does not exist$/,
      );
      // Every sslmode pg knows is taken, and none makes the configuration print pg's warning of its next major
      // version (review: it came up in every CLI command).
      const warnings: string[] = [];
      const onWarning = (warning: Error) => warnings.push(warning.message);
      process.on('warning', onWarning);
      try {
        for (const mode of modes.split(', '))
          assert.equal(
            loadConfig({ DATABASE_URL: url(`sslmode=${mode}`) }).databaseUrl,
            url(`sslmode=${mode}`),
          );
        await new Promise((resolve) => setImmediate(resolve));
      } finally {
        process.off('warning', onWarning);
      }
      assert.deepEqual(warnings, []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SVC_JWT_PRIVATE_KEY', () => {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

  test('a SEC1 ("EC PRIVATE KEY") key is taken and normalised to PKCS#8, the form the signer imports', () => {
    const sec1 = ec.export({ type: 'sec1', format: 'pem' }).toString();
    assert.match(sec1, /BEGIN EC PRIVATE KEY/);
    const pem = loadConfig({ SVC_JWT_PRIVATE_KEY: sec1 }).jwtPrivateKey!;
    assert.match(pem, /^-----BEGIN PRIVATE KEY-----\n/);
    assert.equal(pem, ec.export({ type: 'pkcs8', format: 'pem' }).toString());
  });

  test('SVC_JWT_PREVIOUS_KEY, the key a rotation replaced, is read and checked as SVC_JWT_PRIVATE_KEY is', () => {
    const sec1 = ec.export({ type: 'sec1', format: 'pem' }).toString();
    assert.equal(
      loadConfig({ SVC_JWT_PREVIOUS_KEY: sec1 }).jwtPreviousKey,
      ec.export({ type: 'pkcs8', format: 'pem' }).toString(),
    );
    assert.equal(loadConfig({}).jwtPreviousKey, undefined);
    refused({ SVC_JWT_PREVIOUS_KEY: 'garbage' }, /^SVC_JWT_PREVIOUS_KEY: not an unencrypted private key/);
  });

  test('PKCS#8 EC P-256 and Ed25519 keys are taken as they are', () => {
    for (const key of [ec, generateKeyPairSync('ed25519').privateKey]) {
      const pkcs8 = key.export({ type: 'pkcs8', format: 'pem' }).toString();
      assert.equal(loadConfig({ SVC_JWT_PRIVATE_KEY: pkcs8 }).jwtPrivateKey, pkcs8);
    }
  });

  test('a PEM on one line with its line breaks written \\n (an env file holds one line per variable) is taken', () => {
    const pkcs8 = ec.export({ type: 'pkcs8', format: 'pem' }).toString();
    const oneLine = pkcs8.trimEnd().replaceAll('\n', '\\n');
    assert.ok(!oneLine.includes('\n'));
    assert.equal(loadConfig({ SVC_JWT_PRIVATE_KEY: oneLine }).jwtPrivateKey, pkcs8);
  });

  test("a one-line PEM in single quotes, as .env.example says, is read alike by a shell, node's and docker's readers", () => {
    const pkcs8 = ec.export({ type: 'pkcs8', format: 'pem' }).toString();
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-env-'));
    const file = path.join(dir, '.env');
    // As .env.example tells: awk 'NF {printf "%s\\n", $0}' key.pem, in single quotes.
    const line = `SVC_JWT_PRIVATE_KEY='${pkcs8.trimEnd().replaceAll('\n', '\\n')}'`;
    writeFileSync(file, `${line}\n`);
    const printKey = "process.stdout.write(process.env.SVC_JWT_PRIVATE_KEY ?? '')";
    const readers = {
      // Unquoted, the shell ran `PRIVATE` as a command and left the variable empty (probe).
      shell: execFileSync('bash', ['-c', `set -a; . "$1"; exec node -e "${printKey}"`, 'sh', file], {
        encoding: 'utf8',
      }),
      node: execFileSync(process.execPath, [`--env-file=${file}`, '-e', printKey], { encoding: 'utf8' }),
      // docker run --env-file and systemd take the rest of the line as it is, quotes included.
      docker: line.slice(line.indexOf('=') + 1),
    };
    for (const [reader, value] of Object.entries(readers))
      assert.equal(loadConfig({ SVC_JWT_PRIVATE_KEY: value }).jwtPrivateKey, pkcs8, reader);
    rmSync(dir, { recursive: true });
  });

  test('something else is refused, naming the setting', () => {
    refused(
      { SVC_JWT_PRIVATE_KEY: 'garbage' },
      /^SVC_JWT_PRIVATE_KEY: not an unencrypted private key in PEM form/,
    );
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs1', format: 'pem' })
      .toString();
    refused(
      { SVC_JWT_PRIVATE_KEY: rsa },
      /^SVC_JWT_PRIVATE_KEY: a key of type rsa cannot sign tokens; use an EC P-256/,
    );
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' })
      .privateKey.export({ type: 'sec1', format: 'pem' })
      .toString();
    refused(
      { SVC_JWT_PRIVATE_KEY: p384 },
      /^SVC_JWT_PRIVATE_KEY: a key of type EC secp384r1 cannot sign tokens/,
    );
    const publicKey = createPrivateKey(ec.export({ type: 'pkcs8', format: 'pem' }))
      .export({ type: 'pkcs8', format: 'pem' })
      .toString()
      .replace(/PRIVATE/g, 'PUBLIC');
    refused({ SVC_JWT_PRIVATE_KEY: publicKey }, /^SVC_JWT_PRIVATE_KEY: /);
  });

  test('the error names where a key came from (the data-dir file is checked the same way)', () => {
    assert.throws(
      () => jwtSigningKeyPem('/data/jwt-private-key.pem', 'x'),
      (error: unknown) =>
        error instanceof ConfigError && error.message.startsWith('/data/jwt-private-key.pem: '),
    );
  });
});

describe('durations that timers and the lane functions can hold', () => {
  test('a webhook retry delay longer than ~497 h is refused (with jitter it overflowed every record)', () => {
    refused({ SVC_WEBHOOK_RETRY_SCHEDULE: '5s,720h' }, /^SVC_WEBHOOK_RETRY_SCHEDULE: "720h" is longer than/);
    refused(
      { SVC_WEBHOOK_FAST_RETRY_DELAY_MS: String(MAX_RETRY_DELAY_MS + 1) },
      /^SVC_WEBHOOK_FAST_RETRY_DELAY_MS: /,
    );
    assert.deepEqual(loadConfig({ SVC_WEBHOOK_RETRY_SCHEDULE: '5s,497h' }).webhooks.retryScheduleMs, [
      5_000,
      497 * 3_600_000,
    ]);
  });

  test('SVC_OPS_LISTEN needs a port of its own', () => {
    refused(
      { SVC_PORT: '8080', SVC_OPS_LISTEN: '0.0.0.0:8080' },
      /^SVC_OPS_LISTEN: 0.0.0.0:8080 is the public listener's/,
    );
    refused(
      { SVC_ADMIN_LISTEN: '127.0.0.1:9000', SVC_OPS_LISTEN: '127.0.0.1:9000' },
      /^SVC_OPS_LISTEN: 127.0.0.1:9000 is the operator API's/,
    );
    assert.deepEqual(loadConfig({ SVC_OPS_LISTEN: '127.0.0.1:9090' }).opsListen, {
      host: '127.0.0.1',
      port: 9090,
    });
    // A worker opens neither the public nor the operator listener: its ops port may be theirs (one env file
    // for every role, workers exposing metrics on :8080).
    const worker = loadConfig({
      SVC_ROLE: 'worker',
      SVC_HOST: '0.0.0.0',
      SVC_PORT: '8080',
      SVC_ADMIN_LISTEN: '127.0.0.1:9000',
      SVC_OPS_LISTEN: '0.0.0.0:8080',
    });
    assert.deepEqual(worker.opsListen, { host: '0.0.0.0', port: 8080 });
  });

  test('SVC_DB_POOL_MAX sizes the main pool: 20 by default, at least 2', () => {
    assert.equal(loadConfig({}).databasePoolMax, 20);
    assert.equal(loadConfig({ SVC_DB_POOL_MAX: '15' }).databasePoolMax, 15);
    refused({ SVC_DB_POOL_MAX: '1' }, /^SVC_DB_POOL_MAX: must be an integer from 2 to 1000, got "1"/);
    // A typo's 100000 took every connection of the server and spun idle workers (probe).
    refused(
      { SVC_DB_POOL_MAX: '100002' },
      /^SVC_DB_POOL_MAX: must be an integer from 2 to 1000, got "100002"/,
    );
    refused(
      { SVC_WORKER_CONCURRENCY: '100000' },
      /^SVC_WORKER_CONCURRENCY: must be an integer from 1 to 500, got "100000"/,
    );
    assert.equal(loadConfig({ SVC_WORKER_CONCURRENCY: '500' }).worker.concurrency, 500);
    assert.equal(loadConfig({ SVC_DB_POOL_MAX: '1000' }).databasePoolMax, 1000);
    // A process that runs jobs needs a connection per job, and one for the runner's LISTEN: `svc serve`
    // checks it for the role it serves (checkServing); the other commands run no jobs.
    const serving = (env: Record<string, string>) => () => checkServing(loadConfig(env));
    assert.doesNotThrow(serving({ SVC_ROLE: 'api', SVC_DB_POOL_MAX: '2' }));
    assert.throws(
      serving({ SVC_ROLE: 'worker', SVC_DB_POOL_MAX: '11' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /^SVC_DB_POOL_MAX: 11 is too small for role worker: at least SVC_WORKER_CONCURRENCY \+ 2 \(12\)/.test(
          error.message,
        ),
    );
    assert.doesNotThrow(serving({ SVC_ROLE: 'all', SVC_DB_POOL_MAX: '6', SVC_WORKER_CONCURRENCY: '4' }));
    assert.equal(loadConfig({ SVC_DB_POOL_MAX: '8' }).databasePoolMax, 8, 'read by every command');
  });

  test('lifetimes and delays past a year, and more than 100 fast webhook retries, are refused, naming the setting', () => {
    for (const name of [
      'SVC_QUOTE_EXPIRY_MS',
      'SVC_SETTLEMENT_ACTIVE_AFTER_MS',
      'SVC_SETTLEMENT_TERMINATE_AFTER_MS',
      'SVC_FUNDING_SESSION_EXPIRY_MS',
    ]) {
      // Past the last date a timestamp holds: every quote, session or trade was refused with a 400.
      refused(
        { [name]: String(Number.MAX_SAFE_INTEGER) },
        new RegExp(`^${name}: must be an integer from \\d+ to 31536000000`),
      );
      assert.doesNotThrow(() => loadConfig({ [name]: '31536000000' }));
    }
    refused(
      { SVC_WEBHOOK_FAST_RETRIES: '101' },
      /^SVC_WEBHOOK_FAST_RETRIES: must be an integer from 0 to 100/,
    );
  });

  test('timer settings above 2^31 - 1 ms (a timer then fires at once) are refused, naming the setting', () => {
    for (const name of [
      'SVC_SHUTDOWN_TIMEOUT_MS',
      'SVC_RATE_LIMIT_WINDOW_MS',
      'SVC_RATE_LIMIT_BLOCK_MS',
      'SVC_RATE_LIMIT_REDIS_TIMEOUT_MS',
      'SVC_WORKER_POLL_INTERVAL_MS',
    ]) {
      refused(
        { [name]: String(2 ** 31) },
        new RegExp(`^${name}: must be an integer from \\d+ to 2147483647`),
      );
    }
    refused(
      { SVC_WEBHOOK_TIMEOUT_MS: '600001' },
      /^SVC_WEBHOOK_TIMEOUT_MS: must be an integer from 1 to 600000/,
    );
    assert.equal(loadConfig({ SVC_SHUTDOWN_TIMEOUT_MS: String(2 ** 31 - 1) }).shutdownTimeoutMs, 2 ** 31 - 1);
  });

  test('SVC_RATE_LIMIT_IPV6_PREFIX: every IPv6 address on its own by default (the spec: per IP), 32 to 128 bits', () => {
    assert.equal(loadConfig({}).rateLimit.ipv6PrefixLength, 128);
    assert.equal(loadConfig({ SVC_RATE_LIMIT_IPV6_PREFIX: '64' }).rateLimit.ipv6PrefixLength, 64);
    assert.equal(loadConfig({ SVC_RATE_LIMIT_IPV6_PREFIX: '32' }).rateLimit.ipv6PrefixLength, 32);
    for (const raw of ['31', '129', '/64', '64.0'])
      refused(
        { SVC_RATE_LIMIT_IPV6_PREFIX: raw },
        /^SVC_RATE_LIMIT_IPV6_PREFIX: must be an integer from 32 to 128/,
      );
  });

  test('SVC_SHUTDOWN_DRAIN_MS: off by default, part of the shutdown time, so shorter than it', () => {
    assert.equal(loadConfig({}).shutdownDrainMs, 0);
    assert.equal(loadConfig({ SVC_SHUTDOWN_DRAIN_MS: '5000' }).shutdownDrainMs, 5_000);
    refused(
      { SVC_SHUTDOWN_DRAIN_MS: '10000' },
      /^SVC_SHUTDOWN_DRAIN_MS: 10000 must be less than SVC_SHUTDOWN_TIMEOUT_MS \(10000\)/,
    );
    refused({ SVC_SHUTDOWN_DRAIN_MS: '-1' }, /^SVC_SHUTDOWN_DRAIN_MS: must be an integer/);
    assert.equal(
      loadConfig({ SVC_SHUTDOWN_DRAIN_MS: '15000', SVC_SHUTDOWN_TIMEOUT_MS: '20000' }).shutdownDrainMs,
      15_000,
    );
  });
});

describe('operator token', () => {
  test('SVC_ADMIN_TOKEN of fewer than 24 characters is refused: it is the never rate-limited operator API’s only credential', () => {
    refused({ SVC_ADMIN_TOKEN: 'x' }, /^SVC_ADMIN_TOKEN: must be at least 24 characters \(it is 1\)/);
    refused({ SVC_ADMIN_TOKEN: 'a'.repeat(23) }, /^SVC_ADMIN_TOKEN: must be at least 24/);
    assert.equal(loadConfig({ SVC_ADMIN_TOKEN: 'a'.repeat(24) }).adminToken, 'a'.repeat(24));
    // A header value cannot carry white space at its ends nor anything but printable ASCII: such a token started and
    // then never matched (probe).
    for (const token of [
      `${'a'.repeat(24)} `,
      ` ${'a'.repeat(24)}`,
      `${'a'.repeat(24)}\t`,
      `${'a'.repeat(23)}é`,
    ]) {
      refused(
        { SVC_ADMIN_TOKEN: token },
        /^SVC_ADMIN_TOKEN: must be printable ASCII with no space at either end/,
      );
    }
    const spaced = `${'a'.repeat(12)} ${'b'.repeat(12)}`;
    assert.equal(loadConfig({ SVC_ADMIN_TOKEN: spaced }).adminToken, spaced);
  });
});

describe('what a public listener exposes', () => {
  test('in prod, /admin without SVC_ADMIN_LISTEN and /metrics and /readyz without SVC_OPS_LISTEN are warned about at start', () => {
    const warnings = (env: Record<string, string>) =>
      publicListenerExposures(loadConfig({ SVC_DATA_DIR: '/tmp/unused', ...env }));
    const both = warnings({ SVC_ENV: 'prod', SVC_HOST: '0.0.0.0' });
    assert.equal(both.length, 2);
    assert.match(
      both[0]!,
      /^the operator API \(\/admin\) is served on the public listener 0\.0\.0\.0:8080: set SVC_ADMIN_LISTEN/,
    );
    assert.match(
      both[1]!,
      /^\/metrics and \/readyz are served on the public listener 0\.0\.0\.0:8080, outside the firewall and the rate limit: set SVC_OPS_LISTEN/,
    );
    assert.deepEqual(
      warnings({ SVC_ENV: 'prod', SVC_HOST: '0.0.0.0', SVC_ADMIN_LISTEN: '10.0.1.5:8081' }).map(
        (w) => w.split(' ')[0],
      ),
      ['/metrics'],
    );
    assert.deepEqual(
      warnings({ SVC_ENV: 'prod', SVC_HOST: '0.0.0.0', SVC_OPS_LISTEN: '10.0.1.5:9090' }).map(
        (w) => w.split(' ')[1],
      ),
      ['operator'],
    );
    assert.deepEqual(
      warnings({
        SVC_ENV: 'prod',
        SVC_HOST: '0.0.0.0',
        SVC_ADMIN_LISTEN: '10.0.1.5:8081',
        SVC_OPS_LISTEN: '10.0.1.5:9090',
      }),
      [],
    );
    assert.deepEqual(warnings({ SVC_ENV: 'prod', SVC_HOST: '127.0.0.1' }), []);
    assert.deepEqual(warnings({ SVC_ENV: 'prod', SVC_HOST: '0.0.0.0', SVC_ROLE: 'worker' }), []);
    assert.deepEqual(warnings({ SVC_ENV: 'cert', SVC_HOST: '0.0.0.0' }), []);
  });
});

describe('.env.example', () => {
  const text = readFileSync(path.join(PROJECT_ROOT, '.env.example'), 'utf8');
  /** As `docker run --env-file` and systemd's EnvironmentFile read it: NAME=value, the rest of the line the value. */
  const asEnvFile = () =>
    Object.fromEntries(
      text
        .split('\n')
        .filter((line) => line.trim() !== '' && !line.startsWith('#'))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );

  test('is read as an env file alike by every reader: one NAME=value a line, comments on lines of their own', () => {
    for (const line of text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')))
      assert.match(
        line,
        /^[A-Z][A-Z0-9_]*=[^\s#]*$/,
        `a line a plain env-file reader takes as written: ${line}`,
      );
  });

  test('gives every setting its default, and names every variable the service and the CLI read', () => {
    // Inline comments became part of the value for docker and systemd: SVC_ENV='cert    # cert | prod …' (review).
    assert.deepEqual(loadConfig(asEnvFile()), loadConfig({}));
    const source = (file: string) => readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
    const namesIn = (text: string) => new Set(text.match(/\b(SVC_[A-Z0-9_]+|DATABASE_URL|REDIS_URL)\b/g));
    // The names the code reads, not the list of them.
    const config = source('src/config.ts').replace(/export const SETTINGS = \[[^\]]*\];/, '');
    const read = namesIn([config, source('src/main/cli.ts')].join('\n'));
    const listed = new Set(Object.keys(asEnvFile()));
    assert.deepEqual([...read].filter((name) => !listed.has(name)).sort(), []);
    // SETTINGS, by which unknown variables are told, is every one of them, and the test runner's.
    const runner = namesIn(
      ['scripts/test.ts', 'examples/end-to-end.ts', 'src/sdk/webhook-verify.ts'].map(source).join('\n'),
    );
    assert.deepEqual(
      [...SETTINGS].sort(),
      [...new Set([...read, ...runner])].filter((name) => name.startsWith('SVC_')).sort(),
    );
  });

  test('SVC_ variables it does not read are told, each with the setting it may misspell', () => {
    // SVC_WORKER_CONCURENCY=50 left the concurrency at its default, unsaid (probe).
    const env = {
      SVC_WORKER_CONCURENCY: '50',
      SVC_PORTT: '1',
      SVC_SHUTDOWN_TIMEOUT: '5000',
      SVC_PROT: '1',
      SVC_OTHER_TOOL: 'x',
      // Names of their own, not settings misspelt (review: SVC_DB_URL was told as SVC_URL).
      SVC_DB_URL: 'x',
      SVC_TOKEN: 'x',
      SVC_LOG: 'x',
      SVC_PORT: '8080',
      PATH: '/bin',
    };
    assert.deepEqual(loadConfig(env).unreadSettings, [
      'SVC_DB_URL',
      'SVC_LOG',
      'SVC_OTHER_TOOL',
      'SVC_PORTT (SVC_PORT?)',
      'SVC_PROT (SVC_PORT?)',
      'SVC_SHUTDOWN_TIMEOUT (SVC_SHUTDOWN_TIMEOUT_MS?)',
      'SVC_TOKEN',
      'SVC_WORKER_CONCURENCY (SVC_WORKER_CONCURRENCY?)',
    ]);
    assert.equal(loadConfig(env).worker.concurrency, loadConfig({}).worker.concurrency);
    assert.deepEqual(loadConfig(asEnvFile()).unreadSettings, []);
  });
});
