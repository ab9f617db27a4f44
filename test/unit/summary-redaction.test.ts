import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { isSecretName, maskedEnvironment, maskedSpec } from '../../src/lib/secret-env.js';
import { compilePattern, REDACTED, Redactor } from '../../src/summaries/redact.js';
import { parseRedactPatterns, summarySettingsFromEnv } from '../../src/summaries/summary-settings.js';

describe('redaction', () => {
  const redactor = new Redactor({
    environment: ['API_TOKEN=hunter2', 'DEBUG=1', 'DB_URL=postgres://app:pw@db/x'],
    literals: ['sk-llm-key-0000000000'],
    patterns: [compilePattern('LAB-\\d{4}'), compilePattern('/patient[- ]id: \\w+/i')],
  });

  it('replaces the values of the job environment wherever they appear, naming the variable', () => {
    expect(redactor.redact('token is hunter2, again hunter2')).toBe(
      'token is [redacted:API_TOKEN], again [redacted:API_TOKEN]',
    );
    expect(redactor.redact('connecting to postgres://app:pw@db/x')).toBe('connecting to [redacted:DB_URL]');
  });

  it('leaves values too short to be secrets (they would wreck the text) and names alone', () => {
    expect(redactor.redact('DEBUG is 1 of 10')).toBe('DEBUG is 1 of 10');
  });

  it('replaces literal secrets (the LLM key)', () => {
    expect(redactor.redact('key sk-llm-key-0000000000 end')).not.toContain('sk-llm-key');
  });

  it.each([
    ['export DB_PASSWORD="s3cr3t!"', 'export DB_PASSWORD="[redacted]"'],
    ["aws_secret_access_key = 'abc/def+ghi'", "aws_secret_access_key = '[redacted]'"],
    ['apiKey: 1234abcd', 'apiKey: [redacted]'],
    ['mytool --api-key XYZ123 --verbose', 'mytool --api-key [redacted] --verbose'],
    ['curl -H "Authorization: Bearer abcdefghijkl123"', 'curl -H "Authorization: [redacted] [redacted]"'],
    ['git clone https://bob:ghs_pw@github.com/x.git', 'git clone https://[redacted]@github.com/x.git'],
    ['token ghp_abcdefghijklmnopqrstuvwxyz012345 used', `token ${REDACTED} used`],
    ['key AKIAABCDEFGHIJKLMNOP here', `key ${REDACTED} here`],
    ['jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f', `jwt ${REDACTED}`],
    ['-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----', REDACTED],
  ])('built-in shape: %s', (input, expected) => {
    expect(new Redactor().redact(input)).toBe(expected);
  });

  it('keeps ordinary prose that mentions secrets by name', () => {
    const prose = 'the token usage was fine; password reset is not needed';
    expect(new Redactor().redact(prose)).toBe(prose);
  });

  it('applies the configured patterns (plain or /source/flags)', () => {
    expect(redactor.redact('sample LAB-1234, Patient-ID: X99')).toBe(`sample ${REDACTED}, ${REDACTED}`);
  });

  it('reads SCHEDFLOW_REDACT_PATTERNS as a JSON array or one pattern a line, refusing a broken one', () => {
    expect(parseRedactPatterns('["LAB-\\\\d+", "/mrn:\\\\s*\\\\d+/i"]')).toEqual(['LAB-\\d+', '/mrn:\\s*\\d+/i']);
    expect(parseRedactPatterns('LAB-\\d+\n\n  ACC\\d+  \n')).toEqual(['LAB-\\d+', 'ACC\\d+']);
    expect(() => parseRedactPatterns('ok\n(unclosed')).toThrow(ConfigError);
    expect(() => parseRedactPatterns('ok\n(unclosed')).toThrow(/pattern #2/);
    expect(summarySettingsFromEnv({ SCHEDFLOW_REDACT_PATTERNS: 'LAB-\\d+' })?.redactPatterns).toEqual(['LAB-\\d+']);
  });
});

describe('summary settings from the environment', () => {
  it('needs both the LLM address and the model, and says which is missing', () => {
    expect(() => summarySettingsFromEnv({ SCHEDFLOW_LLM_URL: 'https://llm.example.org' })).toThrow(
      'SCHEDFLOW_LLM_URL is set: set SCHEDFLOW_LLM_MODEL too (GET https://llm.example.org/v1/models lists the models)',
    );
    expect(() => summarySettingsFromEnv({ SCHEDFLOW_LLM_MODEL: 'm' })).toThrow(/SCHEDFLOW_LLM_URL is not/);
  });

  it('reads the switches, limits and the key file name; nothing set gives nothing', () => {
    expect(summarySettingsFromEnv({})).toBeUndefined();
    const settings = summarySettingsFromEnv({
      SCHEDFLOW_SUMMARIES: 'on',
      SCHEDFLOW_LLM_URL: 'https://llm.example.org',
      SCHEDFLOW_LLM_MODEL: 'llama',
      SCHEDFLOW_LLM_API_KEY_FILE: '/etc/schedflow/llm-key',
      SCHEDFLOW_LLM_DAILY_REQUESTS: '50',
      SCHEDFLOW_LLM_CONCURRENCY: '3',
      SCHEDFLOW_LLM_TEMPERATURE: '0.5',
    });
    expect(settings).toMatchObject({
      enabled: true,
      dailyRequestLimit: 50,
      concurrency: 3,
      llm: { url: 'https://llm.example.org', model: 'llama', apiKeyFile: '/etc/schedflow/llm-key', temperature: 0.5 },
    });
    expect(() => summarySettingsFromEnv({ SCHEDFLOW_SUMMARIES: 'maybe' })).toThrow(/on or off/);
    expect(() => summarySettingsFromEnv({ SCHEDFLOW_LLM_DAILY_TOKENS: 'lots' })).toThrow(/whole number/);
  });

  it('keeps a key given in the environment as a Secret', () => {
    const settings = summarySettingsFromEnv({
      SCHEDFLOW_LLM_URL: 'https://llm.example.org',
      SCHEDFLOW_LLM_MODEL: 'llama',
      SCHEDFLOW_LLM_API_KEY: 'sk-env-key-000000',
    });
    expect(JSON.stringify(settings)).not.toContain('sk-env-key');
  });
});

describe('a known secret in other forms', () => {
  const secret = 'Tr0ub4dor&3/horse';
  const redactor = new Redactor({ environment: [`DB_PASS=${secret}`, 'SHORT=abcd'] });
  const mask = '[redacted:DB_PASS]';
  const bytes = Buffer.from(secret);

  it.each([
    ['base64', bytes.toString('base64')],
    ['base64 without its padding', bytes.toString('base64').replace(/=+$/, '')],
    ['URL-safe base64', bytes.toString('base64url')],
    ['URL-encoded', encodeURIComponent(secret)],
    [
      'URL-encoded with lower-case escapes',
      encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    ],
    ['form-encoded', new URLSearchParams({ p: secret }).toString().slice(2)],
    ['hex', bytes.toString('hex')],
    ['HEX', bytes.toString('hex').toUpperCase()],
    ['reversed', [...secret].reverse().join('')],
    ['spaced out', [...secret].join(' ')],
    ['spaced out with dots', [...secret].join('.')],
  ])('%s', (_, form) => {
    expect(redactor.redact(`before ${form} after`)).toBe(`before ${mask} after`);
  });

  it('inside a longer base64 text, wherever it starts (the three byte offsets), in both alphabets', () => {
    for (const before of ['', 'u', 'us', 'usr', 'user:']) {
      for (const alphabet of ['base64', 'base64url'] as const) {
        const encoded = Buffer.from(`${before}${secret}:rest`).toString(alphabet);
        const out = redactor.redact(encoded);
        expect(out, `${before} ${alphabet}`).toContain(mask);
        // What is left around the mask holds bits of its neighbours, never the secret.
        const [head = '', tail = ''] = out.split(mask);
        expect(Buffer.from(head + tail, alphabet).toString('latin1')).not.toContain(secret.slice(0, 4));
      }
    }
  });

  it('short values are replaced as they are, but not searched for in other forms (they would turn up by chance)', () => {
    expect(redactor.redact('abcd YWJjZA==')).toBe('[redacted:SHORT] YWJjZA==');
  });

  it('masks NAME=value when the name says secret by one rule with the job spec views (DB_PASS, apiKey, SSH_KEY), not prose', () => {
    expect(new Redactor().redact('DB_PASS=xyz12 SSH_KEY: abc123 x_auth=t0k')).toBe(
      'DB_PASS=[redacted] SSH_KEY: [redacted] x_auth=[redacted]',
    );
    const prose = 'tests passed: 10; compass: north; key: id; author: bob; passes=3';
    expect(new Redactor().redact(prose)).toBe(prose);
  });
});

describe('secret-looking names, and a job spec as shown', () => {
  it.each([
    'DB_PASS',
    'DB_PASSWORD',
    'API_TOKEN',
    'apiKey',
    'SSH_KEY',
    'AWS_SECRET_ACCESS_KEY',
    'GITHUB_TOKEN',
    'MYSQL_PWD',
    'X_AUTH',
    'SESSION_COOKIE',
    'client_credentials',
  ])('%s is a secret', (name) => {
    expect(isSecretName(name)).toBe(true);
  });

  it.each(['PATH', 'HOME', 'DB_HOST', 'OMP_NUM_THREADS', 'PASSES', 'AUTHOR', 'KEY', 'COMPASS_DIR', 'MONKEY'])(
    '%s is not',
    (name) => {
      expect(isSecretName(name)).toBe(false);
    },
  );

  it('masks the values of secret-looking names (list or map), in the environment and in the other texts of the spec', () => {
    const spec = {
      name: 'load',
      script: '#!/bin/sh\nmysql -p"s3cr3t-pw" -h db.example.org\n',
      environment: ['DB_PASS=s3cr3t-pw', 'DB_HOST=db.example.org', 'PATH=/usr/bin'],
      memory_per_node: 512,
    };
    expect(maskedSpec(spec)).toEqual({
      name: 'load',
      script: '#!/bin/sh\nmysql -p"[redacted:DB_PASS]" -h db.example.org\n',
      environment: ['DB_PASS=[redacted:DB_PASS]', 'DB_HOST=db.example.org', 'PATH=/usr/bin'],
      memory_per_node: 512,
    });
    // Shown, never changed: the history's spec is what a retry submits.
    expect(spec.environment[0]).toBe('DB_PASS=s3cr3t-pw');
    expect(maskedEnvironment({ API_TOKEN: 'tok', N: 1 })).toEqual({ API_TOKEN: '[redacted:API_TOKEN]', N: 1 });
  });
});
