import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../errors.js';
import { SourceError } from '../lib/yaml-source.js';
import { nextFireTimes } from '../pipelines/cron-times.js';
import { pipelineJsonSchema } from '../pipelines/pipeline-file.js';
import { type LoadContext, type LoadedPipeline, pipelineFiles } from '../pipelines/pipeline-loader.js';
import { type FileLoad, loadPipelineSet } from '../pipelines/pipeline-set.js';
import { planRun } from '../pipelines/run-plan.js';
import { codecFor } from '../sched/codecs/codec.js';
import { loadProfiles } from '../sched/profile.js';
import { looksLikeSbatchScript } from '../sched/sbatch-script.js';
import { validateAgainstSpec } from '../sched/spec-validator.js';
import { isApiVersion, LATEST_VERSION } from '../sched/versions.js';
import { EXIT } from './exit-codes.js';
import { table } from './format.js';
import { readJobFile } from './job-file.js';
import { collectParam } from './options.js';
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
      'check pipeline files and sbatch job scripts as the daemon would (for CI); --render prints the submit bodies a run sends, or the spec a script became',
    )
    .argument('<files...>', 'pipeline files (YAML or JSON), folders of them, or sbatch job scripts')
    .option('--config <dir>', 'configuration folder with profiles/ (for account and profile checks)', './config')
    .option('--render', 'print the exact submit bodies of a run, validated against the profile API version')
    .option('--param <name=value>', 'a run parameter for --render (repeatable)', collectParam, {})
    .action((paths: string[], flags: { config: string; render?: boolean; param: Record<string, string> }) => {
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
            print(`${JSON.stringify(render(pipeline, context, flags.param), null, 2)}\n`);
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
            next: [],
            steps: [],
            error: error.message,
          };
        }
        const s = p.def.schedule;
        const next = s?.enabled ? nextFireTimes(s.cron, s.timezone, Date.now(), 5) : [];
        return { name: p.name, file, schedule: s ?? null, next, steps: p.order, error: null };
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
        l.schedule ? `${l.schedule.cron} (${l.schedule.timezone})${l.schedule.enabled ? '' : ' paused'}` : 'manual',
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
  const when = s ? `cron "${s.cron}" (${s.timezone})${s.enabled ? '' : ', paused'}` : 'manual';
  return `pipeline ${p.name}: ${p.order.length} step${p.order.length === 1 ? '' : 's'} (${p.order.join(' → ')}), ${when}`;
}

/**
 * A run's submit bodies, as the client would send them: the profile's account
 * and partition filled in, the request marker and the dependencies on the
 * needed steps' jobs (whose ids exist only at submit time, shown as <step>).
 */
function render(pipeline: LoadedPipeline, context: LoadContext, params: Record<string, string>) {
  const profile = context.profiles.get(pipeline.profile);
  const version = profile && isApiVersion(profile.version) ? profile.version : LATEST_VERSION;
  const plan = planRun(pipeline, {
    runId: '<run id>',
    trigger: 'cli',
    createdAt: Date.now(),
    scheduledFor: null,
    params,
  });
  const codec = codecFor(version);
  const steps = plan.steps.map((step) => {
    const dependency = step.needs.map((n) => `${n.type}:<${n.step}>`).join(',');
    const body = encodeOrExplain(codec, pipeline, step.step, {
      ...step.spec,
      account: step.spec.account ?? profile?.account,
      partition: step.spec.partition ?? profile?.partition,
      comment: step.spec.comment ? `schedflow:<request id> ${step.spec.comment}` : 'schedflow:<request id>',
      ...(dependency && { dependency }),
    });
    const check = validateAgainstSpec(version, 'job_submit_req', body);
    if (!check.ok) {
      throw new ConfigError(
        `${pipeline.file}: step ${step.step}: the submit body is not valid for ${version}: ${check.errors.join('; ')}`,
      );
    }
    return { step: step.step, needs: step.needs, body };
  });
  return { pipeline: pipeline.name, profile: pipeline.profile || null, version, steps };
}

function encodeOrExplain(
  codec: ReturnType<typeof codecFor>,
  pipeline: LoadedPipeline,
  step: string,
  spec: Parameters<ReturnType<typeof codecFor>['encodeSubmit']>[0],
) {
  try {
    return codec.encodeSubmit(spec);
  } catch (error) {
    // A `slurm:` member the version does not know.
    throw new ConfigError(`${pipeline.file}: step ${step}: ${(error as Error).message}`);
  }
}
