/**
 * npm run chaos — fault scenarios against the simulator as a standalone upstream (its own
 * process, behind a counting proxy) and the daemon as a real separate process, measured from
 * outside: duplicates, lost, stuck and wrongly failed requests, the time to recover and the
 * upstream requests each submit cost. Figures, like `npm run bench`; `--ci` alone fails the
 * run, and only on duplicates, losses, stuck or wrongly failed requests, never on timing.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { countsSince } from './counting-proxy.js';
import { parseOptions, scenarioSeed, USAGE } from './options.js';
import { cleanupAll, cleanupOnExit, trackDir } from './processes.js';
import { Random } from './random.js';
import { makeWorld, type RunSettings, SCENARIOS, SLURM_SCENARIOS, type TrialResult, type World } from './scenarios.js';
import { renderTable, type ScenarioFigures, sums } from './table.js';

const options = parseOptions(process.argv.slice(2));
if (options.help) {
  process.stdout.write(
    `${USAGE}\n\nscenarios:\n${SCENARIOS.map((s) => `  ${s.name.padEnd(20)} ${s.what}`).join('\n')}\n`,
  );
  process.exit(0);
}
const all = [...SCENARIOS, ...SLURM_SCENARIOS];
const unknown = options.scenarios?.filter((name) => !all.some((s) => s.name === name)) ?? [];
if (unknown.length) {
  process.stderr.write(`chaos: no scenario ${unknown.join(', ')}; there are: ${all.map((s) => s.name).join(', ')}\n`);
  process.exit(2);
}

cleanupOnExit();
const settings: RunSettings = {
  ci: options.ci,
  deadlineMs: options.ci ? 30_000 : 180_000,
  shutdownWaitMs: options.ci ? 10_000 : 45_000,
};
const base = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-chaos-')));
const pool = options.slurm ? SLURM_SCENARIOS : SCENARIOS;
const chosen = pool.filter((s) => !options.scenarios || options.scenarios.includes(s.name));
const log = (line: string) => process.stderr.write(`chaos: ${line}\n`);
log(
  `seed ${options.seed} (replay: npm run chaos -- --seed ${options.seed}${options.ci ? ' --ci' : ''}); dirs in ${base}`,
);

const startedAt = Date.now();
const figures: ScenarioFigures[] = [];
let shared: { key: string; world: World } | undefined;
const closeShared = async () => {
  await shared?.world.close();
  shared = undefined;
};
for (const scenario of chosen) {
  const trials = scenario.trials(options.trials, settings);
  if (trials === 0) continue;
  const random = new Random(scenarioSeed(options.seed, scenario.name));
  const results: TrialResult[] = [];
  const entry: ScenarioFigures = {
    name: scenario.name,
    trials: results,
    counts: { total: 0, byEndpoint: {}, byStatus: {} },
  };
  figures.push(entry);
  log(`${scenario.name}: ${scenario.what} (${trials} trial${trials > 1 ? 's' : ''})`);
  // A CI run shares a world among consecutive scenarios that allow it; a full run starts each afresh.
  if (!settings.ci || shared?.key !== scenario.world) await closeShared();
  let world = shared?.world;
  if (!world) {
    world = await makeWorld(base, scenario).catch((error: Error) => {
      entry.error = error.message;
      return undefined;
    });
    if (!world) continue;
    shared = { key: scenario.world, world };
  }
  const before = world.counts();
  const scenarioStart = Date.now();
  let failed = false;
  try {
    for (let i = 0; i < trials; i++) {
      const result = await scenario.trial(world, i, random, settings);
      results.push(result);
      const v = result.verdict;
      log(
        `  trial ${i + 1}: ${result.subs.filter((s) => s.requestId).length} accepted, ${v.jobs} scheduler jobs, ` +
          `dup ${v.duplicates} lost ${v.lost} stuck ${v.stuck} wrong ${v.wronglyFailed}, ` +
          `recovered ${v.recoverMs === undefined ? 'never' : `in ${(v.recoverMs / 1000).toFixed(1)} s`}` +
          (result.shutdown
            ? `; shutdown ${(result.shutdown.exitMs / 1000).toFixed(1)} s, code ${result.shutdown.code}, ` +
              `steps not run: ${result.shutdown.stepsMissing.join(', ') || 'none'}`
            : ''),
      );
      for (const note of v.notes.slice(0, 5)) log(`    ${note}`);
      if (v.notes.length > 5) log(`    … and ${v.notes.length - 5} more`);
      // A world whose requests did not all end is not handed on: the next scenario starts afresh.
      if (v.stuck || v.lost) failed = true;
    }
  } catch (error) {
    failed = true;
    entry.error = (error as Error).message;
    log(`  ${scenario.name} stopped: ${(error as Error).message}`);
  } finally {
    entry.counts = countsSince(before, world.counts());
    log(`  ${scenario.name}: ${((Date.now() - scenarioStart) / 1000).toFixed(0)} s`);
    // The scenario's row as soon as it is known: a long run cut off keeps what it measured.
    process.stdout.write(`${renderTable([entry]).split('\n').at(-1)}\n`);
    if (failed) await closeShared();
  }
}
await closeShared();

process.stdout.write(`\n${renderTable(figures)}\n\n`);
process.stdout.write(
  `seed ${options.seed}, ${options.ci ? 'CI run' : `--trials ${options.trials}`}, ${((Date.now() - startedAt) / 1000).toFixed(0)} s` +
    `; jobs = requests the API accepted (2xx); recover = from the end of the fault to every request terminal` +
    `; upstream req/submit = every request the simulator was sent during the scenario (polling too) / scheduler jobs made\n`,
);
if (options.keep) log(`kept ${base}`);
cleanupAll(options.keep);

if (options.ci) {
  const bad = figures.filter((f) => {
    const s = sums(f);
    // A shutdown that skipped a step fails too (how long it took never does).
    const skipped = f.trials.some((t) => (t.shutdown?.stepsMissing.length ?? 0) > 0);
    return f.error || s.duplicates || s.lost || s.stuck || s.wronglyFailed || skipped;
  });
  if (bad.length) {
    process.stdout.write(`chaos --ci: FAILED in ${bad.map((f) => f.name).join(', ')}\n`);
    process.exit(1);
  }
  process.stdout.write(
    'chaos --ci: no duplicate, lost, stuck or wrongly failed request; every shutdown ran every step\n',
  );
}
