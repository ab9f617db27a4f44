/**
 * The table of `schedflow start` settings in docs/configuration.md, generated from the code so it
 * cannot drift: meanings and defaults from `daemonConfigSchema`, flags from the start command's
 * own options, environment variables from what `loadDaemonConfig` really reads.
 *
 *   tsx test/docs/settings-table.ts           prints the table
 *   tsx test/docs/settings-table.ts --write   replaces the generated section of docs/configuration.md
 *
 * test/unit/settings-doc.test.ts fails when the page and the code disagree.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { Command, type Option } from 'commander';
import { registerStartCommand } from '../../src/cli/start-command.js';
import { DAEMON_ENV_NUMBERS, daemonConfigSchema, loadDaemonConfig } from '../../src/config/daemon-config.js';

export const CONFIGURATION_DOC = fileURLToPath(new URL('../../docs/configuration.md', import.meta.url));
const DAEMON_CONFIG_SOURCE = fileURLToPath(new URL('../../src/config/daemon-config.ts', import.meta.url));
export const SECTION_START = '<!-- generated:settings -->';
export const SECTION_END = '<!-- /generated:settings -->';

type SettingKey = keyof typeof daemonConfigSchema.shape;

interface Row {
  setting: string;
  flag: string;
  env: string;
  defaultValue: string;
  meaning: string;
}

/** The start command's options, as `schedflow start --help` knows them. */
function startOptions(): readonly Option[] {
  const program = new Command();
  registerStartCommand(program);
  const start = program.commands.find((c) => c.name() === 'start');
  if (!start) throw new Error('registerStartCommand registered no `start` command');
  return start.options;
}

/**
 * The setting a flag feeds. The start command names its flags after the settings, with `Dir`
 * left off for folders (`--config` → `configDir`); a flag that matches none is a setting of its
 * own (`--log-level`) and gets a row from its commander definition.
 */
function settingOfFlag(option: Option): SettingKey | undefined {
  const attribute = option.attributeName();
  const keys = Object.keys(daemonConfigSchema.shape) as SettingKey[];
  return keys.find((k) => k === attribute) ?? keys.find((k) => k === `${attribute}Dir`);
}

// Values that pass the check of every kind of setting: a whole number, a Redis URL, a host:port,
// a path (any text) and a choice (the log format). The first one loadDaemonConfig accepts is the probe.
const PROBE_VALUES = ['12345', 'redis://probe.invalid:6379', '127.0.0.1:9', 'postgres://probe.invalid/db', 'json'];

/** What a setting needs beside it to be accepted (DATABASE_URL wants a shared Redis and webhook secret). */
const COMPANIONS = { REDIS_URL: 'redis://companion.invalid:6379', SCHEDFLOW_WEBHOOK_SECRET: 'companion' };

/**
 * The settings each environment variable sets, found by setting it and seeing what changes, so a
 * variable listed here is one `loadDaemonConfig` really reads. The candidates are every `env.NAME`
 * of daemon-config.ts and the tuning variables of `DAEMON_ENV_NUMBERS`.
 */
function settingsOfEnv(): Map<SettingKey, string> {
  const source = readFileSync(DAEMON_CONFIG_SOURCE, 'utf8');
  const names = new Set([...source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)/g)].map((m) => m[1] as string));
  for (const name of Object.keys(DAEMON_ENV_NUMBERS)) names.add(name);
  const changedBy = new Map<string, SettingKey[]>();
  for (const name of names) {
    probing: for (const beside of [{}, COMPANIONS]) {
      const base = loadDaemonConfig(beside) as Record<string, unknown>;
      for (const value of PROBE_VALUES) {
        let probed: Record<string, unknown>;
        try {
          probed = loadDaemonConfig({ ...beside, [name]: value }) as Record<string, unknown>;
        } catch {
          continue;
        }
        const changed = Object.keys(probed).filter((k) => !isDeepStrictEqual(probed[k], base[k])) as SettingKey[];
        if (changed.length) {
          changedBy.set(name, changed);
          break probing;
        }
      }
    }
  }
  // A setting derived from another (pipelinesDir from configDir) changes with it: a variable
  // is the one of the setting no other variable alone accounts for.
  const single = new Set([...changedBy.values()].filter((keys) => keys.length === 1).map((keys) => keys[0]));
  const byKey = new Map<SettingKey, string>();
  for (const [name, keys] of changedBy) {
    const own = keys.length === 1 ? keys : keys.filter((k) => !single.has(k));
    if (own.length !== 1) throw new Error(`${name} sets ${keys.join(', ')}: cannot tell which setting it is`);
    const key = own[0] as SettingKey;
    const earlier = byKey.get(key);
    byKey.set(key, earlier ? `${earlier}, ${name}` : name);
  }
  return byKey;
}

function code(text: string): string {
  return `\`${text}\``;
}

function renderDefault(value: unknown): string {
  if (value === undefined) return '—';
  if (Array.isArray(value)) return code(value.join(','));
  // Nested settings (summaries) have defaults of their own, on their page.
  if (typeof value === 'object' && value !== null) return '—';
  return code(String(value));
}

export function settingsRows(): Row[] {
  const defaults = daemonConfigSchema.parse({}) as Record<string, unknown>;
  const options = startOptions();
  const flagOf = new Map<SettingKey, Option>();
  const ownRows: Row[] = [];
  for (const option of options) {
    const key = settingOfFlag(option);
    if (key) {
      flagOf.set(key, option);
      continue;
    }
    ownRows.push({
      setting: '—',
      flag: code(option.flags),
      env: '—',
      defaultValue: renderDefault(option.defaultValue),
      meaning: `${option.description.replace(/^./, (c) => c.toUpperCase())}${option.argChoices ? `: ${option.argChoices.map(code).join(', ')}` : ''}.`,
    });
  }
  const envOf = settingsOfEnv();
  const rows: Row[] = [];
  for (const [key, schema] of Object.entries(daemonConfigSchema.shape) as [
    SettingKey,
    { description?: string; meta?: () => { defaultText?: unknown } | undefined },
  ][]) {
    if (!schema.description) throw new Error(`daemonConfigSchema.${key} has no .describe(): say what it means`);
    const flag = flagOf.get(key);
    const env = envOf.get(key);
    rows.push({
      setting: code(key),
      flag: flag ? code(flag.flags) : '—',
      env: env ? env.split(', ').map(code).join(', ') : '—',
      // A setting read as a unit the user does not write (a retention's milliseconds) shows its default as written.
      defaultValue:
        typeof schema.meta?.()?.defaultText === 'string'
          ? code(schema.meta?.()?.defaultText as string)
          : renderDefault(defaults[key]),
      meaning: schema.description,
    });
  }
  return [...rows, ...ownRows];
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}

/** A Markdown table with its columns padded, as the hand-written tables of the docs are. */
export function renderSettingsTable(rows: Row[] = settingsRows()): string {
  const header = ['setting', 'flag', 'environment', 'default', 'meaning'];
  const body = rows.map((r) => [r.setting, r.flag, r.env, r.defaultValue, r.meaning].map(cell));
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] as string).length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** The page with the text between the markers replaced by the table. */
export function replaceGeneratedSection(page: string, table: string): string {
  const start = page.indexOf(SECTION_START);
  const end = page.indexOf(SECTION_END);
  if (start < 0 || end < start) throw new Error(`the page lacks ${SECTION_START} … ${SECTION_END}`);
  return `${page.slice(0, start + SECTION_START.length)}\n${table}\n${page.slice(end)}`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const table = renderSettingsTable();
  if (process.argv.includes('--write')) {
    const page = readFileSync(CONFIGURATION_DOC, 'utf8');
    const updated = replaceGeneratedSection(page, table);
    if (updated !== page) writeFileSync(CONFIGURATION_DOC, updated);
    process.stdout.write(`${updated === page ? 'unchanged' : 'updated'}: ${CONFIGURATION_DOC}\n`);
  } else {
    process.stdout.write(`${table}\n`);
  }
}
