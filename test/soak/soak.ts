/**
 * npm run soak — the daemon (dist/) under steady, mixed traffic for an hour (`--minutes`), with
 * a fault every few minutes and retention set to minutes, on the simulator as its own process
 * behind chaos's counting proxy. Every `--every` minutes it prints a row of the daemon's
 * resource figures and the duplicate/lost/stuck counts; at the end, a verdict per figure (flat
 * after warm-up, flatness.ts) and on the counts. Exit 1 when a target is missed. Not in CI.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanupAll, cleanupOnExit, sleep, trackDir } from '../chaos/processes.js';
import { Random } from '../chaos/random.js';
import { type FaultRecord, runFaults } from './faults.js';
import { type Figure, Gauges, type Sample } from './gauges.js';
import { type HistoryStats, LIFETIME_TABLES, postgresHistory, sqliteHistory, statsFromCli } from './history-stats.js';
import { Ledger } from './ledger.js';
import { parseSoakOptions, USAGE } from './options.js';
import { FIGURES, type IntervalRow, judgeFigures, renderIntervals, renderVerdicts } from './report.js';
import { Traffic } from './traffic.js';
import { makeSoakWorld } from './world.js';

const options = (() => {
  try {
    return parseSoakOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`soak: ${(error as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
})();
if (options.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

/** How often the figures are read (the rows summarize these readings). */
const SAMPLE_EVERY_MS = 15_000;
/** The longest the requests open when the traffic stops may take to end. */
const DRAIN_MS = 180_000;
/** Longer than any soak job takes, even through a fault: a request open this long is stuck. */
const STUCK_AFTER_MS = 10 * 60_000;

const log = (line: string) => process.stderr.write(`soak: ${new Date().toISOString().slice(11, 19)} ${line}\n`);
cleanupOnExit();
const base = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-soak-')));
log(
  `seed ${options.seed} (replay: npm run soak -- --minutes ${options.minutes} --fault-every ${options.faultEvery} --rate ${options.rate}${options.postgres ? ' --postgres' : ''} --seed ${options.seed}); ` +
    `${options.minutes} min, a row every ${options.every} min, a fault every ${options.faultEvery} min, ` +
    `${options.rate} submissions/min, history on ${options.postgres ? 'PostgreSQL' : 'SQLite'}; dirs in ${base}`,
);

const world = await makeSoakWorld(base, options);
const history = options.postgres
  ? postgresHistory((world.postgres as { url: string }).url)
  : sqliteHistory(world.daemon.dataDir);
// `schedflow db stats --json` when this build has it (the retention branch); else the soak's own SQL.
const fromCli = await statsFromCli(world.daemon.dataDir, world.daemon.env);
const readStats: () => Promise<HistoryStats> = fromCli
  ? async () => (await statsFromCli(world.daemon.dataDir, world.daemon.env)) ?? history.stats()
  : () => history.stats();
log(
  fromCli
    ? 'history figures from `schedflow db stats --json`'
    : 'history figures by SQL (this build has no `schedflow db stats --json`; its retention settings may be unknown to it too)',
);
const figures: Figure[] = FIGURES.filter((f) => (options.postgres ? f !== 'walBytes' : f !== 'pgConnections'));

const random = new Random(options.seed);
const ledger = new Ledger();
const traffic = new Traffic(world, random, options.rate, (id, kind) => ledger.accept(id, kind));
const gauges = new Gauges(world, history, readStats);
const samples: Sample[] = [];
const rows: IntervalRow[] = [];
const faults: FaultRecord[] = [];
let webhookCalls = 0;

const startedAt = Date.now();
const trafficEndsAt = startedAt + options.minutes * 60_000;
let sampling = true;

/** Reads the figures and the history every SAMPLE_EVERY_MS until told to stop. */
const sampler = (async () => {
  while (sampling) {
    const at = Date.now();
    samples.push(await gauges.read());
    try {
      ledger.observe(await history.requests(), await world.sim.jobs());
    } catch (error) {
      log(`could not read the history: ${(error as Error).message}`);
    }
    // The receiver keeps every call; the soak only counts them (its own memory is not what is measured).
    webhookCalls += world.receiver.calls.length;
    world.receiver.calls.length = 0;
    await sleep(Math.max(0, at + SAMPLE_EVERY_MS - Date.now()));
  }
})();

let last429 = 0;
let rowFrom = startedAt;
const addRow = (label: string, final = false, cutoff?: number) => {
  const now = Date.now();
  const count429 = world.proxy.counts().byStatus['429'] ?? 0;
  rows.push({
    label,
    samples: samples.filter((s) => s.at >= rowFrom && s.at <= now),
    ledger: ledger.counts({ stuckAfterMs: STUCK_AFTER_MS, final, cutoff }),
    faults: faults.filter((f) => f.at >= rowFrom && f.at <= now),
    upstream429: count429 - last429,
  });
  last429 = count429;
  rowFrom = now;
  process.stdout.write(`${renderIntervals(rows.slice(-1), figures).split('\n').at(-1)}\n`);
};

traffic.start();
const faultRun = runFaults(world, random, options.faultEvery * 60_000, trafficEndsAt, faults, log);

process.stdout.write(`${renderIntervals([], figures)}\n`);
for (let m = options.every; m < options.minutes + 1e-9; m += options.every) {
  await sleep(Math.max(0, startedAt + m * 60_000 - Date.now()));
  addRow(`${Number(m.toFixed(2))}`);
}
await sleep(Math.max(0, trafficEndsAt - Date.now()));
log('traffic ends; waiting for every open request to end');
await traffic.stop();
await faultRun;
const stoppedAt = Date.now();
// The drain: the requests the history showed by now must all end (the cron's later runs are not counted).
const drainEnd = stoppedAt + DRAIN_MS;
while (Date.now() < drainEnd) {
  await sleep(SAMPLE_EVERY_MS);
  if (ledger.counts({ stuckAfterMs: STUCK_AFTER_MS, cutoff: stoppedAt }).open === 0) break;
}
await sleep(SAMPLE_EVERY_MS + 1000);
sampling = false;
await sampler;
addRow('end', true, stoppedAt);

const final = rows.at(-1)?.ledger;
const verdicts = judgeFigures(samples, figures, { start: startedAt, end: trafficEndsAt });
const c = traffic.counts;
process.stdout.write(`\n${renderIntervals(rows, figures)}\n\n${renderVerdicts(verdicts)}\n\n`);
process.stdout.write(
  `traffic: sent ${JSON.stringify(c.sent)}, accepted ${JSON.stringify(c.accepted)}, unanswered ${c.unanswered}, ` +
    `refused ${c.refused}; cancels answered ${c.cancelsAnswered}, too late ${c.cancelsTooLate}, refused ${c.cancelsRefused}; ` +
    `webhook calls received ${webhookCalls}; requests in the history ${final?.seen ?? 0} (pipeline steps and retries included)\n`,
);
process.stdout.write(
  `faults: ${faults.map((f) => `${f.name} at ${((f.at - startedAt) / 60_000).toFixed(1)} min (${(f.durationMs / 1000).toFixed(0)} s)${f.error ? ` went wrong: ${f.error}` : ''}`).join('; ') || 'none'}\n`,
);
// Where the figures stand at the end, by part: what grows, if something does.
const lastStats = await readStats().catch(() => undefined);
if (lastStats) {
  const tables = Object.entries(lastStats.byTable)
    .filter(([, t]) => t.rows > 0)
    .sort((a, b) => b[1].rows - a[1].rows)
    .map(([name, t]) => `${name} ${t.rows} (${(t.bytes / 1024).toFixed(0)} KiB)`);
  process.stdout.write(`history rows by table (${lastStats.source}): ${tables.join(', ')}\n`);
  process.stdout.write(
    `not in the judged history rows: ${Object.entries(LIFETIME_TABLES)
      .map(([name, why]) => `${name} ${lastStats.byTable[name]?.rows ?? 0} (${why})`)
      .join(', ')}\n`,
  );
}
const keyKinds = await gauges.redisKeyKinds().catch(() => []);
process.stdout.write(`redis keys by kind: ${keyKinds.map(([k, n]) => `${k} ${n}`).join(', ')}\n`);
for (const [error, n] of traffic.errors) process.stdout.write(`client error ×${n}: ${error}\n`);
for (const note of final?.notes.slice(0, 20) ?? []) process.stdout.write(`  ${note}\n`);

const grows = verdicts.filter((v) => v.verdict.flat !== true).map((v) => v.figure);
const missed = [
  ...(final?.duplicates ? [`${final.duplicates} duplicates`] : []),
  ...(final?.lost ? [`${final.lost} lost`] : []),
  ...(final?.stuck ? [`${final.stuck} stuck`] : []),
  ...(grows.length ? [`not flat: ${grows.join(', ')}`] : []),
];
process.stdout.write(
  `seed ${options.seed}, ${((Date.now() - startedAt) / 60_000).toFixed(1)} min; flat = the last third's max within the tolerance of the middle third's (the first third is warm-up)\n`,
);
process.stdout.write(missed.length ? `soak: TARGETS MISSED: ${missed.join('; ')}\n` : 'soak: every target met\n');

gauges.close();
await history.close();
await world.close();
if (options.keep) log(`kept ${base}`);
cleanupAll(options.keep);
process.exit(missed.length ? 1 : 0);
