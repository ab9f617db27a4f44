import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../errors.js';
import { SourceError } from '../lib/yaml-source.js';
import { nextFireTimes } from '../pipelines/cron-times.js';
import { pipelineJsonSchema } from '../pipelines/pipeline-file.js';
import { type LoadContext, type LoadedPipeline, pipelineFiles } from '../pipelines/pipeline-loader.js';
import { type FileLoad, loadPipelineSet } from '../pipelines/pipeline-set.js';
import { renderRun } from '../pipelines/run-render.js';
import { upstreamsOf } from '../pipelines/upstream-links.js';
import { loadProfiles } from '../sched/profile.js';
import { looksLikeSbatchScript } from '../sched/sbatch-script.js';
import { EXIT } from './exit-codes.js';
import { table } from './format.js';
import { readJobFile } from './job-file.js';
import { collectParam } from './options.js';
import { runRenderText } from './run-render-text.js';
import { print, printError } from './terminal.js';

/** Profiles of a config folder, for the same checks the daemon makes (accounts, profile names). */
function loadContext(configDir: string): LoadContext {
  const profiles = loadProfiles(join(resolve(configDir), 'profiles'));
  return { profiles, defaultProfile: [...profiles.keys()][0] };
}

/** Files named on the command line; a folder stands for its pipeline files. */
function expandFiles(paths: string[]): string[] {
  return paths.flatMap((p) => {
    try {
      return statSync(p).isDirectory() ? pipelineFiles(p) : [resolve(p)];
    } catch {
      return [resolve(p)];
    }
  });
}

/** A job script (`#!` or `#SBATCH` lines) rather than a pipeline file: its content says, as for `jobs submit`. */
function isJobScript(file: string): boolean {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return false; // the pipeline loader says what is wrong with it
  }
  return looksLikeSbatchScript(text);
}

/**
 * The named files loaded the way the daemon loads its folder: each with the
 * other pipeline files of its folder, so a name another file there uses is
 * refused here too. Results for the named files only, in the order named.
 */
function validateFiles(files: string[], context: LoadContext): FileLoad[] {
  const byFolder = new Map<string, string[]>();
  for (const file of files) byFolder.set(dirname(file), [...(byFolder.get(dirname(file)) ?? []), file]);
  const results = new Map<string, FileLoad>();
  for (const [folder, named] of byFolder) {
    const set = [...new Set([...pipelineFiles(folder), ...named])];
    for (const result of loadPipelineSet(set, context).results) {
      if (named.includes(result.file)) results.set(result.file, result);
    }
  }
  return files.flatMap((file) => results.get(file) ?? []);
}

interface ValidateFlags {
  config: string;
  render?: boolean;
  /** With --render: the text form; JSON stays the default, as CI scripts parse it. */
  text?: boolean;
  param: Record<string, string>;
}

export function registerPipelinesCommands(program: Command): void {
  program
    .command('schema')
    .description('print the JSON Schema of pipeline files (shipped as config/pipeline.schema.json)')
    .action(() => {
      print(`${JSON.stringify(pipelineJsonSchema(), null, 2)}\n`);
    });

  program
    .command('validate')
    .description(
      'check pipeline files and sbatch job scripts as the daemon would (for CI); --render prints, for each step of a run, when it is submitted, what resolves when, and its submit body (or the spec a script became)',
    )
    .argument('<files...>', 'pipeline files (YAML or JSON), folders of them, or sbatch job scripts')
    .option('--config <dir>', 'configuration folder with profiles/ (for account and profile checks)', './config')
    .option(
      '--render',
      "print a run's steps as JSON: when each is submitted, its placeholders by when they resolve, and its submit body, validated against the profile API version",
    )
    .option('--text', 'with --render: pipelines in a form to read rather than JSON')
    .option('--param <name=value>', 'a run parameter for --render (repeatable)', collectParam, {})
    .action((paths: string[], flags: ValidateFlags) => {
      const context = loadContext(flags.config);
      if (context.profiles.size === 0) {
        printError(`note: no profiles in ${resolve(flags.config)}/profiles: profile and account checks skipped\n`);
      }
      const files = expandFiles(paths);
      const scripts = files.filter(isJobScript);
      let failed = 0;
      for (const file of scripts) {
        try {
          const { spec } = readJobFile(file);
          print(
            flags.render
              ? `${JSON.stringify({ file, spec }, null, 2)}\n`
              : `ok  ${file}  job script: ${spec.name}${spec.partition ? ` (partition ${spec.partition})` : ''}\n`,
          );
        } catch (error) {
          if (!(error instanceof SourceError || error instanceof ConfigError)) throw error;
          failed++;
          printError(`${error.message}\n`);
        }
      }
      for (const { file, pipeline, error } of validateFiles(
        files.filter((file) => !scripts.includes(file)),
        context,
      )) {
        try {
          if (error) throw error;
          if (flags.render) {
            const rendered = renderRun(pipeline, context.profiles.get(pipeline.profile), flags.param);
            print(flags.text ? runRenderText(rendered) : `${JSON.stringify(rendered, null, 2)}\n`);
          } else {
            print(`ok  ${file}  ${describe(pipeline)}\n`);
          }
        } catch (error) {
          if (!(error instanceof SourceError || error instanceof ConfigError)) throw error;
          failed++;
          printError(`${error.message}\n`);
        }
      }
      if (failed > 0) {
        const what = scripts.length > 0 ? 'file' : 'pipeline file';
        printError(`${failed} invalid ${what}${failed === 1 ? '' : 's'}\n`);
        process.exitCode = EXIT.usage;
      }
    });

  program
    .command('pipelines')
    .description('list the pipelines of a folder with their schedules and next five fire times')
    .option('--pipelines <dir>', 'pipeline folder (default <config>/pipelines)')
    .option('--config <dir>', 'configuration folder with profiles/', './config')
    .option('--json', 'one JSON document')
    .action((flags: { pipelines?: string; config: string; json?: boolean }) => {
      const dir = resolve(flags.pipelines ?? join(flags.config, 'pipelines'));
      const context = loadContext(flags.config);
      const listed = loadPipelineSet(pipelineFiles(dir), context).results.map(({ file, pipeline: p, error }) => {
        if (error) {
          return {
            name: `${basename(file)} (invalid)`,
            file,
            schedule: null,
            on: [],
            next: [],
            steps: [],
            error: error.message,
          };
        }
        const s = p.def.schedule;
        const next = s?.enabled ? nextFireTimes(s.cron, s.timezone, Date.now(), 5) : [];
        const on = upstreamsOf(p).map(([end, pipeline]) => ({ end, pipeline }));
        return { name: p.name, file, schedule: s ?? null, on, next, steps: p.order, error: null };
      });
      if (flags.json) {
        const out = listed.map((l) => ({ ...l, next: l.next.map((t) => new Date(t).toISOString()) }));
        print(`${JSON.stringify(out, null, 2)}\n`);
        return;
      }
      if (listed.length === 0) {
        print(`no pipeline files in ${dir}\n`);
        return;
      }
      const rows = listed.map((l) => [
        l.name,
        l.schedule
          ? `${l.schedule.cron} (${l.schedule.timezone})${l.schedule.enabled ? '' : ' paused'}`
          : l.on.length
            ? `after ${l.on.map((o) => `${o.pipeline} (${o.end === 'finished' ? 'any end' : o.end})`).join(', ')}`
            : 'manual',
        l.steps.join(' → ') || '-',
        l.next.length ? new Date(l.next[0] as number).toLocaleString() : '-',
      ]);
      print(`${table(['PIPELINE', 'SCHEDULE', 'STEPS', 'NEXT'], rows)}\n`);
      for (const l of listed) {
        if (l.error) print(`\n${l.error}\n`);
        else if (l.next.length > 1) {
          const times = l.next.map((t) => `  ${new Date(t).toLocaleString()}  (${new Date(t).toISOString()})`);
          print(`\n${l.name}: next fire times\n${times.join('\n')}\n`);
        }
      }
      if (listed.some((l) => l.error)) process.exitCode = EXIT.usage;
    });
}

function describe(p: LoadedPipeline): string {
  const s = p.def.schedule;
  const follows = upstreamsOf(p).map(([end, upstream]) => `${upstream} (${end === 'finished' ? 'any end' : end})`);
  const when =
    [
      ...(s ? [`cron "${s.cron}" (${s.timezone})${s.enabled ? '' : ', paused'}`] : []),
      ...(follows.length ? [`started by runs of ${follows.join(', ')}`] : []),
    ].join(', ') || 'manual';
  return `pipeline ${p.name}: ${p.order.length} step${p.order.length === 1 ? '' : 's'} (${p.order.join(' → ')}), ${when}`;
}
