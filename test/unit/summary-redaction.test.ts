import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
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
