import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { createLogger, type LoggerSettings } from '../../src/logger.js';

/**
 * The daemon's log as createLogger writes it (src/logger.ts, src/lib/pretty-log.ts): a real
 * pino logger writing to a file, read back.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function logged(settings: LoggerSettings, log: (logger: ReturnType<typeof createLogger>) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-log-'));
  dirs.push(dir);
  const file = join(dir, 'log');
  const fd = openSync(file, 'w');
  try {
    log(createLogger({ ...settings, fd }));
  } finally {
    closeSync(fd);
  }
  return readFileSync(file, 'utf8');
}

const STACK_LINE = /^ +at /m;

describe('pretty log lines', () => {
  it('say level, component, message and fields on one line, an expected error by its message only', () => {
    const text = logged({ format: 'pretty', colors: false }, (logger) => {
      const error = new ConfigError('the scheduler is unavailable (HTTP 503); will retry');
      logger
        .child({ component: 'reconcile' })
        .warn({ profile: 'demo', code: error.code, err: error }, 'accounting import failed; will retry');
    });
    expect(text).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} WARN {2}\[reconcile\] accounting import failed; will retry profile=demo code=SCHEDFLOW_ERR_CONFIG err="the scheduler is unavailable \(HTTP 503\); will retry"\n$/,
    );
    expect(text).not.toMatch(STACK_LINE);
  });

  it('show the stack at the error level, for a bug at any level, and for every error at debug', () => {
    const atError = logged({ format: 'pretty', colors: false }, (logger) =>
      logger.error({ err: new ConfigError('broken') }, 'shutdown step failed'),
    );
    expect(atError).toMatch(/ERROR shutdown step failed\n {4}ConfigError: broken\n {6}at /);
    const bug = logged({ format: 'pretty', colors: false }, (logger) =>
      logger.warn({ err: new TypeError('x is undefined') }, 'UI live updates: reading the history failed'),
    );
    expect(bug).toMatch(STACK_LINE);
    const debug = logged({ format: 'pretty', colors: false, level: 'debug' }, (logger) =>
      logger.warn({ err: new ConfigError('away') }, 'accounting import failed; will retry'),
    );
    expect(debug).toMatch(STACK_LINE);
  });

  it('keep secrets redacted, escape what a terminal would obey, and colour only when asked', () => {
    const text = logged({ format: 'pretty', colors: false }, (logger) =>
      logger.info(
        { token: 'sfa_secret', headers: { authorization: 'Bearer sfa_secret' }, job: 'a\x1b]0;pwned\x07b' },
        'line one\nline two',
      ),
    );
    expect(text).not.toContain('sfa_secret');
    expect(text).toContain('token="[redacted]"');
    expect(text).toContain('line one\\nline two');
    expect(text).not.toContain('\x1b');
    expect(text.split('\n')).toHaveLength(2);
    const coloured = logged({ format: 'pretty', colors: true }, (logger) => logger.warn('careful'));
    expect(coloured).toContain('\x1b[33mWARN \x1b[0m careful');
  });

  it('are JSON, one object a line, in the json format', () => {
    const text = logged({ format: 'json' }, (logger) =>
      logger.child({ component: 'poll' }).warn({ token: 'sfa_secret', err: new ConfigError('away') }, 'poll failed'),
    );
    const entry = JSON.parse(text) as Record<string, unknown>;
    expect(entry).toMatchObject({ level: 40, component: 'poll', msg: 'poll failed', token: '[redacted]' });
    expect((entry.err as { stack: string }).stack).toMatch(STACK_LINE);
  });
});
