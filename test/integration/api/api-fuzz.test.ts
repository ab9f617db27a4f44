import fc from 'fast-check';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import { listRuns } from '../../../src/db/runs.js';
import type { ApiScope } from '../../../src/db/schema.js';
import { createToken, revokeToken } from '../../../src/db/tokens.js';
import {
  ArraySyntaxError,
  DEFAULT_MAX_ARRAY_SIZE,
  indexesOf,
  MAX_ARRAY_EXPRESSION_CHARS,
  parseArrayExpression,
} from '../../../src/sched/job-array.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { checkApiAnswer } from '../../helpers/openapi-check.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Careless users and hostile input: fast-check builds requests over every route the
 * OpenAPI document lists (so a new route is fuzzed without editing this file), with
 * tokens of every scope and none, malformed bodies, odd ids, queries and headers, and
 * sends them over the daemon's real socket (the daemon does not expose its Fastify app;
 * a real socket also puts Node's HTTP parser in front, as users get it). Properties:
 * no 500, no hang, every error in the documented shape, and afterwards no job request
 * or run in the history that the API did not accept. And isolation (docs/owners.md): the
 * tokens are owner `fuzz`'s (the admin's aside), the ids drawn are also another owner's
 * (a request, a run, its step, its pipeline), which answer a non-admin exactly as unknown
 * ones do, and no answer to a non-admin names anything of that owner's.
 *
 * Seed: fixed by default (CI), `FUZZ_SEED=random` or `FUZZ_SEED=<n>` on demand; the seed
 * is printed, so `FUZZ_SEED=<printed>` replays a failure. `FUZZ_RUNS` changes the count.
 */

const FIXED_SEED = 20_261_124;
const SEED = seedFrom(process.env.FUZZ_SEED);
const RUNS = runsFrom(process.env.FUZZ_RUNS);
/**
 * An answer that costs the process more CPU than this is a slow path (a parse gone quadratic, a
 * runaway pattern). Generous: the slowest honest request parses 1 MiB. CPU, not the time to the
 * answer: on a loaded 2-core run a 401 took 2,065 ms to come back, waiting for a core.
 */
const ANSWER_CPU_LIMIT_MS = 2000;
/** An answer that has not come by then is a hang: given up, so the report names it instead of the test timing out. */
const ABORT_AFTER_MS = 15_000;

/** The process's CPU (user and system, every thread) since `start` (process.cpuUsage()), in ms. */
function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

function seedFrom(text: string | undefined): number {
  if (text === undefined || text === '') return FIXED_SEED;
  if (text === 'random') return Math.floor(Math.random() * 2 ** 31);
  const seed = Number(text);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be "random" or an integer, not "${text}"`);
  return seed;
}

function runsFrom(text: string | undefined): number {
  if (text === undefined || text === '') return 2000;
  const runs = Number(text);
  if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`FUZZ_RUNS must be a positive integer, not "${text}"`);
  return runs;
}

// A pipeline with a schedule that does not fire during the test (pause and resume answer 200
// to `submit`: it is the tokens' owner's) and a defaulted parameter; and one without a schedule
// (pause and resume: 409) whose parameter is required (only manual pipelines may have one).
const SCHEDULED = [
  'owner: fuzz',
  'schedule:',
  '  cron: "0 0 1 1 *"',
  'params:',
  '  who: world',
  'steps:',
  '  only:',
  '    script: |',
  '      #!/bin/sh',
  '      echo hello ${params.who}',
].join('\n');
const MANUAL = [
  'owner: fuzz',
  'params:',
  '  who: null',
  'steps:',
  '  only:',
  '    script: |',
  '      #!/bin/sh',
  '      echo ${params.who}',
].join('\n');

/** Another owner's pipeline: its name, its run and the run's step are drawn as ids too. */
const THEIRS = ['owner: elsewhere', 'steps:', '  only:', '    script: |', '      #!/bin/sh', '      echo theirs'].join(
  '\n',
);
const OTHER_OWNER = 'elsewhere';

/** Ids that name nothing, of each kind: what another owner's must answer as. */
const UNKNOWN_IDS = { job: '00000000-0000-4000-8000-00000000f022', run: '00000000-0000-4000-8000-00000000f023' };
const UNKNOWN_PIPELINE = 'nope-fuzz';

/** One route of the OpenAPI document. */
interface DocRoute {
  method: string;
  /** `/api/v1/jobs/{id}` */
  template: string;
  pathParams: string[];
  queryParams: string[];
  hasBody: boolean;
  /** Statuses it documents. */
  statuses: Set<number>;
}

const openApiSchema = z.object({
  paths: z.record(
    z.string(),
    z.record(
      z.string(),
      z
        .object({
          parameters: z.array(z.object({ in: z.string(), name: z.string() })).optional(),
          requestBody: z.unknown().optional(),
          responses: z.record(z.string(), z.unknown()).optional(),
        })
        .loose(),
    ),
  ),
});

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace']);

function routesOf(document: unknown): DocRoute[] {
  const { paths } = openApiSchema.parse(document);
  return Object.entries(paths).flatMap(([template, operations]) =>
    Object.entries(operations)
      .filter(([method]) => HTTP_METHODS.has(method))
      .map(([method, operation]) => {
        const parameters = operation.parameters ?? [];
        return {
          method: method.toUpperCase(),
          template,
          pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name),
          queryParams: parameters.filter((p) => p.in === 'query').map((p) => p.name),
          hasBody: operation.requestBody !== undefined,
          statuses: new Set(Object.keys(operation.responses ?? {}).map(Number)),
        };
      }),
  );
}

/** The documented error body: `{ error: { code, message, … } }`, codes sharing the prefix. */
const errorBody = z.object({
  error: z.object({ code: z.string().regex(/^SCHEDFLOW_ERR_[A-Z_]+$/), message: z.string().min(1) }).loose(),
});

// ---- what a generated request is

type TokenKind =
  | 'read'
  | 'submit'
  | 'cancel'
  | 'admin'
  | 'all'
  | 'none'
  | 'unknown'
  | 'revoked'
  | 'malformed'
  | 'lowercase';

/**
 * A path parameter: one of the ids the daemon has made (resolved when sent), one of another
 * owner's, or text as it goes on the wire.
 */
type PathValue = { known: number } | { other: number } | { raw: string };

interface FuzzRequest {
  /** An index into the routes, or a method and path off the document. */
  route: { index: number; method?: string } | { method: string; path: string };
  params: PathValue[];
  query: string;
  token: TokenKind;
  headers: Record<string, string>;
  body: string | Buffer | undefined;
  /** Sent twice at once: races on the same Idempotency-Key and resource. */
  twice: boolean;
}

/**
 * Percent-encodes every code unit, a lone surrogate as the 3 bytes of its WTF-8 form
 * (invalid UTF-8, which is what a careless client sends); encodeURIComponent would throw.
 */
function encodeLoose(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join('');
    } else {
      out += encodeURIComponent(char);
    }
  }
  return out;
}

/** A body whose JSON text holds a lone surrogate as raw WTF-8 bytes (not as a \u escape). */
function wtf8(text: string): Buffer {
  return Buffer.from(decodeURIComponentLoose(encodeLoose(text)), 'latin1');
}

function decodeURIComponentLoose(encoded: string): string {
  return encoded.replace(/%([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

const ODD_PATH_VALUES = [
  '..',
  '.',
  '%2e%2e',
  '..%2F..%2F..%2Fetc%2Fpasswd',
  '%2F',
  '%00',
  '%ZZ',
  '%',
  '%E0%A4%A',
  '%ED%A0%80',
  '%C0%AF',
  '%FF%FE',
  '+',
  '%20',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  '%F0%9F%92%A9',
  '\u00e9',
  '\u00ff\u00fe',
  'a;b=c',
  '*',
  'null',
  'undefined',
  '0',
  '-1',
  '9007199254740993',
];

const pathValue: fc.Arbitrary<PathValue> = fc.oneof(
  { weight: 6, arbitrary: fc.nat().map((known) => ({ known })) },
  { weight: 2, arbitrary: fc.nat().map((other) => ({ other })) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => ({ raw: encodeLoose(s) })) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map((s) => ({ raw: encodeLoose(s) })) },
  { weight: 2, arbitrary: fc.constantFrom(...ODD_PATH_VALUES).map((raw) => ({ raw })) },
  { weight: 1, arbitrary: fc.uuid().map((raw) => ({ raw })) },
  // 200 is the schema's bound; past about 16 KiB Node's parser refuses the request line itself.
  {
    weight: 1,
    arbitrary: fc.integer({ min: 190, max: 20_000 }).map((n) => ({ raw: 'a'.repeat(n) })),
  },
);

const QUERY_VALUES = [
  '1',
  '50',
  '200',
  '0',
  '-1',
  '201',
  '1.5',
  '1e3',
  '1e309',
  'NaN',
  'Infinity',
  '-0',
  '0x10',
  '%205',
  '',
  'true',
  'false',
  'TRUE',
  'queued,running',
  'queued,,running',
  ',',
  'nope',
  'COMPLETED,FAILED',
  'test',
  'greet',
  '2026-11-01T08:00:00Z',
  '2026-11-01T08:00:00',
  '2026-02-31T25:00:00Z',
  '2026-02-30T00:00:00Z',
  '9999-12-31T23:59:59.999999999%2B14:00',
  '%ZZ',
  '%ED%A0%80',
  '__proto__',
];

/** Cursors: base64url of JSON that is not the key a list made, or of text that is not JSON at all. */
const cursorValue: fc.Arbitrary<string> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null').toString('base64url')),
  fc
    .constantFrom('[1e999,"x"]', '[-1e999,1e999,"x"]', '[0,"\\ud800"]', '[1.5,"x"]', '[1,2,"x"]', '[', '')
    .map((t) => Buffer.from(t).toString('base64url')),
  fc.string({ maxLength: 30 }).map(encodeURIComponent),
);

function queryOf(route: DocRoute | undefined): fc.Arbitrary<string> {
  const documented = route?.queryParams ?? [];
  const key = fc.oneof(
    { weight: documented.length > 0 ? 6 : 0, arbitrary: fc.constantFrom(...(documented.length ? documented : ['x'])) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'limit[]', '', 'a.b', 'state[0]', 'LIMIT'),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 10 }).map(encodeLoose) },
  );
  const value = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...QUERY_VALUES) },
    { weight: 2, arbitrary: cursorValue },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(encodeLoose) },
    { weight: 1, arbitrary: fc.integer({ min: 400, max: 3000 }).map((n) => 'x'.repeat(n)) },
  );
  const pairs = fc.array(fc.tuple(key, value), { maxLength: 4 }).map((list) => list.map(([k, v]) => `${k}=${v}`));
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant('') },
    { weight: 6, arbitrary: pairs.map((list) => (list.length ? `?${list.join('&')}` : '')) },
    { weight: 1, arbitrary: fc.constantFrom('?', '?&&', '?limit', '?=1', '?%ZZ=1', '?limit=1&limit=2', '?#x') },
  );
}

// ---- bodies

const wellFormedSpec = fc.record({
  name: fc.string({ minLength: 1, maxLength: 20 }),
  script: fc.constant('#!/bin/sh\ntrue\n'),
  time_limit: fc.integer({ min: 1, max: 10 }),
});

/**
 * Array expressions (issue 30): text of any kind, expressions near Slurm's syntax (ranges,
 * steps, throttles, numbers up to and past MaxArraySize's largest, stray characters), and
 * hostile ones, a few bytes naming millions of indexes or the same range thousands of times.
 */
const arrayIndex = fc.oneof(
  fc.integer({ min: 0, max: 20 }),
  fc.integer({ min: 0, max: 1100 }),
  fc.constantFrom(999, 1000, 1001, 4_000_000, 4_000_001, 2 ** 31, 2 ** 53),
  fc.integer({ min: 0, max: 10 }).map((n) => '9'.repeat(n * 4 + 1)),
);
const arrayToken = fc.oneof(
  arrayIndex.map(String),
  fc.tuple(arrayIndex, arrayIndex).map(([a, b]) => `${a}-${b}`),
  fc.tuple(arrayIndex, arrayIndex, fc.integer({ min: 0, max: 40 })).map(([a, b, step]) => `${a}-${b}:${step}`),
  fc.constantFrom('', '-', '1-', '-1', '1--2', '1:2', '1-2:', ' 3 ', 'x', '1-2-3', '0x10', '1e3', '½'),
);
const nearArrayExpression = fc
  .tuple(
    fc.array(arrayToken, { minLength: 1, maxLength: 8 }),
    fc.option(fc.oneof(arrayIndex.map(String), fc.constantFrom('', '0', 'x', '%2')), { nil: undefined }),
  )
  .map(([tokens, throttle]) => `${tokens.join(',')}${throttle === undefined ? '' : `%${throttle}`}`);
const hostileArrayExpression = fc.oneof(
  fc.constantFrom('0-4000000%1', '0-4000000', '0-4000000:1', '4000000', '0-1000,0-1000'),
  fc
    .tuple(fc.integer({ min: 2, max: 20_000 }), fc.constantFrom('0-4000000', '0-1000', '0-1000:1', '5'))
    .map(([n, range]) => Array.from({ length: n }, () => range).join(',')),
  // Every step of one range: each step laid one by one would cost the range over again.
  fc.integer({ min: 2, max: 5000 }).map((n) => Array.from({ length: n }, (_, i) => `0-1000:${i + 1}`).join(',')),
  fc.integer({ min: 1, max: 5 }).map((n) => '1'.repeat(MAX_ARRAY_EXPRESSION_CHARS * n)),
);
const arrayExpression = fc.oneof(
  { weight: 2, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 5, arbitrary: nearArrayExpression },
  { weight: 2, arbitrary: hostileArrayExpression },
);
/**
 * The same sent to the API, where one that fits is accepted and its tasks run on the simulator:
 * indexes mostly small, and hostile ones the door refuses, so that the run does not become a
 * load test of the simulator's thousands of tasks.
 */
const smallArrayToken = fc.oneof(
  fc.integer({ min: 0, max: 20 }).map(String),
  fc.tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 20 })).map(([a, b]) => `${a}-${b}`),
  fc.constantFrom('0-4000000', '1001', '0-1000:1000', '4000001', '1-', 'x', '', '2:3'),
);
const apiArrayExpression = fc.oneof(
  { weight: 2, arbitrary: fc.string({ maxLength: 30 }) },
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.array(smallArrayToken, { minLength: 1, maxLength: 6 }), fc.constantFrom('', '%1', '%0', '%x', '%2%3'))
      .map(([tokens, throttle]) => `${tokens.join(',')}${throttle}`),
  },
  {
    weight: 2,
    arbitrary: fc.oneof(
      fc.constantFrom('0-4000000%1', '0-4000000', '4000000'),
      fc
        .tuple(fc.integer({ min: 2, max: 20_000 }), fc.constantFrom('0-4000000', '5', '1001'))
        .map(([n, range]) => Array.from({ length: n }, () => range).join(',')),
      fc.integer({ min: 1, max: 5 }).map((n) => '1'.repeat(MAX_ARRAY_EXPRESSION_CHARS * n)),
    ),
  },
);

/** A spec as a careless user writes one: members missing, of the wrong type, out of range, misspelt. */
const carelessSpec = fc.record(
  {
    name: fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.constant(null), fc.string({ unit: 'binary' })),
    script: fc.oneof(
      fc.constant('#!/bin/sh\ntrue\n'),
      fc.constant('echo no interpreter line'),
      fc.string({ maxLength: 40 }).map((s) => `#!/bin/sh\n${s}`),
      fc.constant(''),
    ),
    time_limit: fc.oneof(
      fc.integer({ min: -5, max: 2 ** 33 }),
      fc.double(),
      fc.constantFrom('1:00:00', 'UNLIMITED', 'bogus', '99999999999', '1-00:00:00', '1e3', '-1', ''),
    ),
    partition: fc.constantFrom('debug', 'lab-owner', 'nope', '', 7),
    account: fc.constantFrom('lab', 'other', ''),
    memory_per_node: fc.constantFrom('512M', '4G', '99999999999999999999999T', -1, 1e308, '1.5G', 'lots'),
    environment: fc.oneof(
      fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null))),
      fc.array(fc.string({ maxLength: 12 }), { maxLength: 3 }),
    ),
    tasks: fc.oneof(fc.integer(), fc.double(), fc.constant('2')),
    cpus_per_task: fc.integer({ min: -1, max: 2 ** 32 + 1 }),
    // Pass-through job_desc_msg members, checked against slurmrestd's schema, and a misspelling.
    nice: fc.oneof(fc.integer(), fc.string({ maxLength: 5 })),
    hold: fc.oneof(fc.boolean(), fc.constant('yes')),
    time_limt: fc.constant(5),
    current_working_directory: fc.constantFrom('/tmp', '', '../../..', '/nonexistent'),
    array: fc.oneof(apiArrayExpression, fc.integer(), fc.constant(null)),
  },
  { requiredKeys: [] },
);

/** A well-formed spec with an array: near Slurm's syntax, or hostile. */
const arraySpec = fc
  .tuple(wellFormedSpec, apiArrayExpression)
  .map(([spec, array]) => ({ spec: { ...spec, array }, profile: 'test' }));

/** `retry-tasks` bodies: index expressions of every kind, and other members. */
const retryTasksBody = fc.oneof(
  { weight: 4, arbitrary: arrayExpression.map((indexes) => ({ indexes })) },
  { weight: 2, arbitrary: apiArrayExpression.map((indexes) => ({ indexes })) },
  { weight: 1, arbitrary: fc.constantFrom({}, { indexes: 3 }, { indexes: '' }, { indexes: '1', extra: 1 }) },
);

const deadlines = fc.record(
  {
    max_pending: fc.oneof(fc.integer({ min: -10, max: 2 ** 40 }), fc.double(), fc.constant('600')),
    start_by: fc.constantFrom('2026-11-01T08:00:00Z', '2099-01-01T00:00:00+02:00', 'tomorrow', '2026-02-30T00:00:00Z'),
    finish_by: fc.constantFrom('2026-10-01T08:00:00Z', '2099-01-02T00:00:00Z', '', 5),
  },
  { requiredKeys: [] },
);

// ---- webhook targets (issue 30): the daemon allows 127.0.0.1 only (ALLOW_HOSTS below)

/** What a drawn webhook URL's host is, by construction: the door must refuse `inward` and take the others. */
type TargetTruth = 'inward' | 'public' | 'allowed';
/** Every webhook URL drawn, with what its host is; the property checks answers against it. */
const targetTruth = new Map<string, TargetTruth>();
const ALLOW_HOSTS = ['127.0.0.1'];

/** An IPv4 address as a URL may write it: dotted, one number, hex, octal, short forms, IPv4-mapped IPv6. */
const v4Spelling = (octets: number[]): fc.Arbitrary<string> => {
  const [a = 0, b = 0, c = 0, d = 0] = octets;
  const whole = ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
  const hex = (n: number) => n.toString(16).padStart(2, '0');
  return fc.constantFrom(
    `${a}.${b}.${c}.${d}`,
    `${a}.${b}.${c}.${d}.`,
    String(whole),
    `0x${whole.toString(16)}`,
    octets.map((o) => `0x${o.toString(16)}`).join('.'),
    octets.map((o) => `0${o.toString(8)}`).join('.'),
    `${a}.${(b << 16) + (c << 8) + d}`,
    `${a}.${b}.${(c << 8) + d}`,
    `[::ffff:${a}.${b}.${c}.${d}]`,
    `[::ffff:${hex(a)}${hex(b)}:${hex(c)}${hex(d)}]`,
  );
};

const octet = fc.integer({ min: 0, max: 255 });
/** An address in one of the ranges webhooks may not reach: loopback, private, link-local, CGNAT, this network, multicast, reserved. */
const inwardV4 = fc.oneof(
  fc.tuple(fc.constant(127), octet, octet, octet),
  fc.tuple(fc.constant(10), octet, octet, octet),
  fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), octet, octet),
  fc.tuple(fc.constant(192), fc.constant(168), octet, octet),
  fc.tuple(fc.constant(169), fc.constant(254), octet, octet),
  fc.tuple(fc.constant(100), fc.integer({ min: 64, max: 127 }), octet, octet),
  fc.tuple(fc.constant(0), octet, octet, octet),
  fc.tuple(fc.integer({ min: 224, max: 255 }), octet, octet, octet),
);
/** Public by the classification, and never routed (the documentation networks, RFC 5737). */
const publicV4 = fc
  .tuple(fc.constantFrom([192, 0, 2], [198, 51, 100], [203, 0, 113]), octet)
  .map(([n, d]) => [...n, d]);
const group = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const inwardV6 = fc.oneof(
  fc.constantFrom('[::1]', '[::]', '[0:0:0:0:0:0:0:1]', '[fd00:ec2::254]', '[::127.0.0.1]', '[64:ff9b::7f00:1]'),
  group.map((g) => `[fe80::${g}]`),
  fc.tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), group).map(([p, g]) => `[${p.toString(16)}::${g}]`),
  group.map((g) => `[ff02::${g}]`),
);
const publicV6 = group.map((g) => `[2001:db8::${g}]`);
const inwardName = fc.oneof(
  fc.constantFrom('localhost', 'LOCALHOST.', 'metadata.google.internal', 'metadata', 'instance-data', 'jenkins'),
  fc.domain().map((d) => `${d}.localhost`),
  fc.domain().map((d) => `${d}.internal`),
  fc.domain().map((d) => `${d}.local`),
);
/** Names that never resolve (.invalid, RFC 6761): public as far as the door can tell. */
const publicName = fc.domain().map((d) => `${d}.invalid`);

const isLoopbackOne = (octets: number[]) => octets.join('.') === '127.0.0.1';
const drawnTarget: fc.Arbitrary<string> = fc
  .oneof(
    inwardV4.chain((o) => v4Spelling(o).map((host) => ({ host, truth: isLoopbackOne(o) ? 'allowed' : 'inward' }))),
    publicV4.chain((o) => v4Spelling(o).map((host) => ({ host, truth: 'public' }))),
    v4Spelling([127, 0, 0, 1]).map((host) => ({ host, truth: 'allowed' })),
    inwardV6.map((host) => ({ host, truth: 'inward' })),
    publicV6.map((host) => ({ host, truth: 'public' })),
    inwardName.map((host) => ({ host, truth: 'inward' })),
    publicName.map((host) => ({ host, truth: 'public' })),
  )
  .chain(({ host, truth }) =>
    fc.tuple(fc.constantFrom('http', 'https'), fc.constantFrom('', ':9', ':6379', ':80')).map(([scheme, port]) => {
      const url = `${scheme}://${host}${port}/hook`;
      targetTruth.set(url, truth as TargetTruth);
      return url;
    }),
  );

/** Webhooks point at loopback's discard port, or anywhere (the daemon dispatches no delivery: see beforeAll). */
const webhookUrl = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('http://127.0.0.1:9/hook', 'https://u:p@127.0.0.1:9/h?t=1') },
  { weight: 1, arbitrary: fc.constantFrom('ftp://x', 'not a url', '') },
  { weight: 4, arbitrary: drawnTarget },
);

const submission = fc
  .record(
    {
      spec: fc.oneof({ weight: 3, arbitrary: wellFormedSpec }, { weight: 3, arbitrary: carelessSpec }, fc.jsonValue()),
      profile: fc.constantFrom('test', 'nope', ''),
      webhook_url: webhookUrl,
      deadlines: fc.oneof(deadlines, fc.jsonValue({ maxDepth: 1 })),
      summarize: fc.oneof(fc.boolean(), fc.constant('yes'), fc.constant(null)),
      unknown_member: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: [] },
  )
  .chain((body) =>
    // Mostly without the unknown member, so that well-formed submissions are accepted often.
    fc.boolean().map((keepUnknown) => {
      const { unknown_member: _, ...rest } = body;
      return keepUnknown ? body : rest;
    }),
  );

/** A submission the API takes: accepted requests give the id routes real ids to work on. */
const goodSubmission = fc.record(
  {
    spec: wellFormedSpec,
    profile: fc.constant('test'),
    webhook_url: fc.oneof({ weight: 2, arbitrary: fc.constant('http://127.0.0.1:9/hook') }, drawnTarget),
    deadlines: fc.constant({ max_pending: 600, finish_by: '2099-01-01T00:00:00Z' }),
    summarize: fc.boolean(),
  },
  { requiredKeys: ['spec'] },
);

const goodTrigger = fc.record(
  { params: fc.record({ who: fc.string({ maxLength: 10 }) }), webhook_url: drawnTarget },
  { requiredKeys: ['params'] },
);

const trigger = fc.record(
  {
    params: fc.oneof(
      fc.record({ who: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean(), fc.constant(null)) }),
      fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 })),
      fc.constant([]),
    ),
    webhook_url: webhookUrl,
  },
  { requiredKeys: [] },
);

/** `depth` levels of arrays or objects around a value. */
function nested(depth: number, kind: 'array' | 'object', inner: string): string {
  return kind === 'array'
    ? `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}${inner}${'}'.repeat(depth)}`;
}

const HOSTILE_TEXTS = [
  '{"spec":{"__proto__":{"admin":true}}}',
  '{"__proto__":{"x":1},"spec":{}}',
  '{"constructor":{"prototype":{"x":1}}}',
  '{"spec":{"name":"\\ud800","script":"#!/bin/sh\\n"}}',
  '{"\\udc00":1}',
  '{"spec":{"name":"x","script":"#!/bin/sh\\n","time_limit":1e999}}',
  '{"spec":{"name":"x","script":"#!/bin/sh\\n","tasks":-1e999}}',
  '{"params":{"who":1e999}}',
  '{"deadlines":{"max_pending":1e999},"spec":{"name":"x","script":"#!/bin/sh\\n"}}',
  'NaN',
  '{"a":NaN}',
  'null',
  'true',
  '[]',
  '{}',
  '{',
  '"text"',
  '1e999',
  '-0',
  '\u0000',
  '{"spec":1,"spec":2}',
  '\ufeff{}',
  '{"spec":{"name":"x","script":"#!/bin/sh\\n"}}garbage',
  '{"params":{"who":"x"},"params":{"who":"y"}}',
];

const anyBody: fc.Arbitrary<string | Buffer | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant('') },
  { weight: 8, arbitrary: submission.map((b) => JSON.stringify(b)) },
  { weight: 3, arbitrary: trigger.map((b) => JSON.stringify(b)) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 1, arbitrary: fc.object({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'null') },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 400 }), fc.constantFrom('array' as const, 'object' as const), fc.boolean())
      .map(([depth, kind, asSpec]) => (asSpec ? `{"spec":${nested(depth, kind, '1')}}` : nested(depth, kind, '1'))),
  },
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_TEXTS) },
  // A lone surrogate as raw bytes on the wire rather than as an escape.
  {
    weight: 1,
    arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map((s) => wtf8(JSON.stringify({ spec: { name: s } }))),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 60 }) },
  // Huge strings: just under and over the 1 MiB body limit.
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1000, max: 1_100_000 })
      .map((n) => JSON.stringify({ spec: { name: 'x'.repeat(n), script: '#!/bin/sh\ntrue\n' } })),
  },
);

/** A route's body: mostly one made for it (well-formed or careless), else anything. */
function bodyFor(route: DocRoute | undefined): fc.Arbitrary<string | Buffer | undefined> {
  if (route?.method === 'POST' && route.template === '/api/v1/jobs') {
    return fc.oneof(
      { weight: 4, arbitrary: goodSubmission.map((b) => JSON.stringify(b)) },
      { weight: 3, arbitrary: submission.map((b) => JSON.stringify(b)) },
      { weight: 2, arbitrary: arraySpec.map((b) => JSON.stringify(b)) },
      { weight: 3, arbitrary: anyBody },
    );
  }
  if (route?.method === 'POST' && route.template.endsWith('/retry-tasks')) {
    return fc.oneof(
      { weight: 4, arbitrary: retryTasksBody.map((b) => JSON.stringify(b)) },
      { weight: 2, arbitrary: anyBody },
    );
  }
  if (route?.method === 'POST' && route.template.endsWith('/runs')) {
    return fc.oneof(
      { weight: 4, arbitrary: goodTrigger.map((b) => JSON.stringify(b)) },
      { weight: 2, arbitrary: trigger.map((b) => JSON.stringify(b)) },
      { weight: 3, arbitrary: anyBody },
    );
  }
  return anyBody;
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/JSON',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json;;',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/vnd.api+json',
  'a/b/c',
  '',
  'application/json\u00e9',
];

/** ASCII 0x21–0x7e, what a well-formed Idempotency-Key is made of. */
const printable = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)) });
/** What undici will put in a header at all: tab, 0x20–0x7e and 0x80–0xff. */
const headerText = fc.string({
  unit: fc
    .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(9))
    .map((c) => String.fromCharCode(c)),
  maxLength: 40,
});

const idempotencyKey: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 5, arbitrary: fc.constant(undefined) },
  // A few keys used again and again: replays, and the same key with another body or route.
  { weight: 4, arbitrary: fc.constantFrom('order-1', 'order-2', 'order-3') },
  { weight: 2, arbitrary: printable.filter((s) => s.length >= 1 && s.length <= 255) },
  { weight: 1, arbitrary: fc.integer({ min: 256, max: 2000 }).map((n) => 'k'.repeat(n)) },
  { weight: 1, arbitrary: headerText },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', 'a b', '\u00e9t\u00e9', 'k\t') },
);

const headers: fc.Arbitrary<Record<string, string>> = fc
  .record(
    {
      'content-type': fc.oneof(
        { weight: 6, arbitrary: fc.constant('application/json') },
        fc.constantFrom(...CONTENT_TYPES),
      ),
      'idempotency-key': idempotencyKey,
      accept: fc.constantFrom('text/html', '*/*', 'application/xml'),
      'content-encoding': fc.constantFrom('gzip', 'identity', 'br'),
    },
    { requiredKeys: ['content-type', 'idempotency-key'] },
  )
  .map((h) =>
    Object.fromEntries(Object.entries(h).filter((entry): entry is [string, string] => entry[1] !== undefined)),
  );

const token: fc.Arbitrary<TokenKind> = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom<TokenKind>('read', 'submit', 'cancel', 'admin', 'all') },
  { weight: 3, arbitrary: fc.constantFrom<TokenKind>('none', 'unknown', 'revoked', 'malformed', 'lowercase') },
);

function requestArbitrary(routes: readonly DocRoute[]): fc.Arbitrary<FuzzRequest> {
  // Routes that make things are drawn more often: what they make is what the others work on.
  const documented = fc.oneof(
    ...routes.map((route, index) => ({ weight: route.hasBody ? 4 : 1, arbitrary: fc.constant({ index }) })),
  );
  const otherMethod = fc
    .tuple(fc.nat({ max: routes.length - 1 }), fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND', 'TRACE'))
    .map(([index, method]) => ({ index, method }));
  const offDocument = fc
    .tuple(
      fc.constantFrom('GET', 'POST', 'DELETE'),
      fc.constantFrom(
        '/api/v1',
        '/api/v1/',
        '/api/v1/nope',
        '/api/v1/jobs/',
        '/api/v1//jobs',
        '/api/v1/jobs/x/y/z',
        '/api/v2/jobs',
        '/API/V1/JOBS',
        '/api/v1/%6Aobs',
        '/api/v1/jobs/%ZZ/resubmit',
        '/api/v1/pipelines/%ED%A0%80/runs',
      ),
    )
    .map(([method, path]) => ({ method, path }));
  const route = fc.oneof({ weight: 12, arbitrary: documented }, { weight: 1, arbitrary: otherMethod }, offDocument);
  return route.chain((chosen) =>
    fc.record({
      route: fc.constant(chosen),
      params: fc.array(pathValue, { minLength: 2, maxLength: 2 }),
      query: queryOf('index' in chosen ? routes[chosen.index] : undefined),
      token,
      headers,
      body: bodyFor('index' in chosen ? routes[chosen.index] : undefined),
      twice: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    }),
  );
}

// ---- the run

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let routes: DocRoute[];
const tokens = new Map<TokenKind, string>();
/** Another owner's ids (a request and a run's step; the run): set in beforeAll. */
const others = { jobs: [] as string[], runs: [] as string[] };
/** The tokens of owner `fuzz` that are not admins: another owner's ids are unknown to them. */
const FUZZ_OWNER_TOKENS: ReadonlySet<TokenKind> = new Set(['read', 'submit', 'cancel', 'all', 'lowercase']);
const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 8 });

beforeAll(async () => {
  redis = await startTestRedis();
  // Benchmark mode: jobs take a second of simulated time and run no script.
  sim = await startSim({ simulatedRuntimeSec: 1 });
  td = await startTestDaemon(
    sim.url,
    redis.url,
    {
      // The per-token limit would answer most of a 2,000-request run with 429 before any route ran.
      apiRateLimitPerMin: 1_000_000,
      webhookAllowHosts: ALLOW_HOSTS,
      // Webhook URLs drawn name hosts anywhere: the door is what is fuzzed, and no delivery is
      // ever dispatched (the first tick finds none; the next is an hour away), so none calls out.
      notifyEveryMs: 3_600_000,
    },
    // The client's request budget (default 5 a second) is shared by polling, submitting and
    // cancelling: with dozens of submissions a second, a cancel waits its turn for seconds.
    // The simulator takes 1,000 a second; so may the client here.
    { rateLimit: { capacity: 200, refillPerSecond: 200 } },
    { 'greet.yaml': SCHEDULED, 'manual.yaml': MANUAL, 'theirs.yaml': THEIRS },
  );
  const store = td.daemon.history.store;
  const make = async (kind: TokenKind, scopes: ApiScope[]) =>
    tokens.set(
      kind,
      (await createToken(store, { name: `fuzz-${kind}`, scopes, owner: kind === 'admin' ? 'default' : 'fuzz' })).token,
    );
  await make('read', ['read']);
  await make('submit', ['submit']);
  await make('cancel', ['cancel']);
  await make('admin', ['admin']);
  await make('all', ['read', 'submit', 'cancel']);
  await make('revoked', ['admin']);
  await revokeToken(store, 'fuzz-revoked');
  const document = await send({ method: 'GET', path: '/api/v1/openapi.json', headers: {} });
  routes = routesOf(JSON.parse(document.text));
  // Another owner's request, run and step, made by its own token.
  const theirs = (await createToken(store, { name: 'fuzz-elsewhere', scopes: ['read', 'submit'], owner: OTHER_OWNER }))
    .token;
  const made = async (path: string, body: unknown) => {
    const r = await send({
      method: 'POST',
      path,
      headers: { authorization: `Bearer ${theirs}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const id = idOf(r.text);
    if (r.status !== 201 || !id) throw new Error(`${path}: ${r.status} ${r.text}`);
    return id;
  };
  const job = await made('/api/v1/jobs', { spec: { name: 'theirs', script: '#!/bin/sh\ntrue\n', time_limit: 1 } });
  const run = await made('/api/v1/pipelines/theirs/runs', {});
  const step = await waitFor(
    async () => {
      const r = await send({
        method: 'GET',
        path: `/api/v1/runs/${run}`,
        headers: { authorization: `Bearer ${theirs}` },
      });
      return (JSON.parse(r.text) as { steps?: { id: string }[] }).steps?.[0]?.id;
    },
    { what: "the step of another owner's run" },
  );
  others.jobs.push(job, step);
  others.runs.push(run);
}, 60_000);

afterAll(async () => {
  await dispatcher.close();
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

interface Answer {
  status: number;
  text: string;
  contentType: string;
  requestId: string | undefined;
  ms: number;
  /** The process's CPU while it was answered: the daemon's (it runs in this process) and the sender's. */
  cpuMs: number;
}

async function send(input: {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer | undefined;
}): Promise<Answer> {
  const origin = td.daemon.apiUrl ?? '';
  const started = performance.now();
  const cpuAtStart = process.cpuUsage();
  const signal = AbortSignal.timeout(ABORT_AFTER_MS);
  let answer: Answer;
  try {
    const response = await dispatcher.request({
      origin,
      path: input.path,
      method: input.method as 'GET',
      headers: input.headers,
      body: input.body,
      signal,
    });
    const text = await response.body.text();
    const contentType = response.headers['content-type'];
    const requestId = response.headers['x-request-id'];
    answer = {
      status: response.statusCode,
      text,
      contentType: typeof contentType === 'string' ? contentType : '',
      requestId: typeof requestId === 'string' ? requestId : undefined,
      ms: performance.now() - started,
      cpuMs: cpuMsSince(cpuAtStart),
    };
  } catch (error) {
    if (signal.aborted) throw new Error(`no answer within ${ABORT_AFTER_MS} ms: ${input.method} ${input.path}`);
    throw error;
  }
  // Every answer agrees with the document (its status declared, its body of the declared
  // schema); a path that is no URL (absolute-form, `*`) is not checked.
  await checkApiAnswer({ method: input.method, url: `${origin}${input.path}`, ...answer });
  return answer;
}

function authorization(kind: TokenKind): string | undefined {
  switch (kind) {
    case 'none':
      return undefined;
    case 'unknown':
      return `Bearer sfa_${'0'.repeat(43)}`;
    case 'malformed':
      return 'Basic dXNlcjpwYXNz';
    case 'lowercase':
      return `bearer ${tokens.get('all')}`;
    default:
      return `Bearer ${tokens.get(kind)}`;
  }
}

describe('the local API under generated requests', () => {
  it(`answers ${RUNS} generated requests without a 500 or a hang, errors in the documented shape, and stores nothing it refused`, async () => {
    const jobIds: string[] = [];
    const runIds: string[] = [];
    const acceptedJobs = new Set<string>();
    const acceptedRuns = new Set<string>();
    const statuses = new Map<number, number>();
    let sent = 0;
    let slowestMs = 0;
    let slowest = '';
    const started = performance.now();
    console.log(`api fuzz: seed ${SEED}, ${RUNS} runs (FUZZ_SEED=${SEED} replays this run)`);

    const resolve = (value: PathValue, template: string, param: string): string => {
      if ('raw' in value) return value.raw;
      if ('other' in value) {
        const pool = param === 'name' ? ['theirs'] : template.startsWith('/api/v1/runs') ? others.runs : others.jobs;
        return encodeURIComponent(pool[value.other % pool.length] ?? 'x');
      }
      const pool = param === 'name' ? ['greet', 'manual'] : template.startsWith('/api/v1/runs') ? runIds : jobIds;
      return encodeURIComponent(pool.length ? (pool[value.known % pool.length] ?? 'x') : 'none-yet');
    };
    /** What an unknown id of the same kind is, in place of another owner's. */
    const unknownFor = (template: string, param: string): string =>
      param === 'name' ? UNKNOWN_PIPELINE : template.startsWith('/api/v1/runs') ? UNKNOWN_IDS.run : UNKNOWN_IDS.job;
    const otherNames = () => [OTHER_OWNER, 'theirs', ...others.jobs, ...others.runs];
    let isolationPairs = 0;

    await fc.assert(
      fc.asyncProperty(requestArbitrary(routes), async (fuzz) => {
        const route = 'index' in fuzz.route ? routes[fuzz.route.index] : undefined;
        let method: string;
        let path: string;
        /** Another owner's ids the path names, and the path with unknown ids in their place. */
        let otherInPath: string[] = [];
        let unknownPath = '';
        const replacements = new Map<string, string>();
        if ('index' in fuzz.route) {
          if (!route) throw new Error('no route');
          method = fuzz.route.method ?? route.method;
          let i = 0;
          path = route.template.replace(/\{([^}]+)\}/g, (_m, param: string) =>
            resolve(fuzz.params[i++] ?? { known: 0 }, route.template, param),
          );
          let j = 0;
          otherInPath = [];
          unknownPath = route.template.replace(/\{([^}]+)\}/g, (_m, param: string) => {
            const value = fuzz.params[j++] ?? { known: 0 };
            if (!('other' in value)) return resolve(value, route.template, param);
            const other = resolve(value, route.template, param);
            otherInPath.push(other);
            const unknown = unknownFor(route.template, param);
            replacements.set(other, unknown);
            return unknown;
          });
        } else {
          method = fuzz.route.method;
          path = fuzz.route.path;
        }
        path += fuzz.query;
        unknownPath += fuzz.query;
        const auth = authorization(fuzz.token);
        const headers = { ...fuzz.headers, ...(auth !== undefined && { authorization: auth }) };
        // Any method may carry a body (GET and DELETE too); HEAD's would confuse the framing.
        const withBody = method !== 'HEAD' ? fuzz.body : undefined;
        const request = { method, path, headers, body: withBody };
        const answers = await Promise.all(fuzz.twice ? [send(request), send(request)] : [send(request)]);
        for (const answer of answers) {
          sent++;
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          const what = `${method} ${path.slice(0, 200)} → ${answer.status} ${answer.text.slice(0, 300)}`;
          if (answer.ms > slowestMs) {
            slowestMs = answer.ms;
            slowest = `${what.slice(0, 200)} (body ${withBody?.length ?? 0} bytes)`;
          }
          expect(
            answer.cpuMs,
            `answered with ${Math.round(answer.cpuMs)} ms of CPU (in ${Math.round(answer.ms)} ms): ${what}`,
          ).toBeLessThan(ANSWER_CPU_LIMIT_MS);
          // 503 only where the route documents it (a scheduler out of reach on cancel, pipelines not
          // loaded, readiness); no other 5xx at all.
          const documented503 = answer.status === 503 && method === route?.method && route.statuses.has(503);
          expect(answer.status < 500 || documented503, what).toBe(true);
          // Every answer carries the id its log line has (README), those of Node's parser too.
          expect(answer.requestId ?? 'none', `X-Request-Id: ${what}`).toMatch(/^[0-9a-f-]{36}$/);
          if (answer.status >= 400 && method !== 'HEAD') {
            expect(answer.contentType, what).toMatch(/^application\/json/);
            let parsed: unknown;
            try {
              parsed = JSON.parse(answer.text);
            } catch {
              parsed = undefined;
            }
            expect(errorBody.safeParse(parsed).success, `error shape: ${what}`).toBe(true);
          }
          // The OpenAPI document lists what each route answers. A request line or headers over
          // 16 KiB (431, Node's parser) and a path parameter over the router's bound (414) are
          // refused before any route: they are in the README's table.
          if (route && method === route.method && answer.status !== 431 && answer.status !== 414) {
            expect([...route.statuses], `a status ${route.template} does not document: ${what}`).toContain(
              answer.status,
            );
          }
          // The door and the webhook targets: an inward host is refused, with its own code; a public
          // or allowed one is not refused for its host.
          const target = webhookUrlOf(withBody);
          const truth = target === undefined ? undefined : targetTruth.get(target);
          const refusedTarget = answer.status === 400 && answer.text.includes('SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED');
          const takesWebhook =
            method === 'POST' &&
            route?.method === 'POST' &&
            /^\/api\/v1\/(jobs|pipelines\/\{name\}\/runs)$/.test(route.template);
          if (takesWebhook && truth !== undefined && answer.status < 300) {
            expect(truth, `an inward webhook target taken: ${what}`).not.toBe('inward');
          }
          if (refusedTarget) expect(truth, `a webhook target refused: ${what}`).toBe('inward');
          // Nothing of another owner's is named to a non-admin, but the ids it asked about.
          if (FUZZ_OWNER_TOKENS.has(fuzz.token) && otherInPath.length === 0) {
            for (const name of otherNames()) expect(answer.text, `${name} leaked: ${what}`).not.toContain(name);
          }
          // An off-document path the router reads as a route's (`/api/v1/%6Aobs` is /api/v1/jobs)
          // accepts as that route does: what it made is accepted too (a random seed found one).
          const template =
            route && method === route.method
              ? route.template
              : route === undefined && path.startsWith('/api/v1/%6Aobs')
                ? '/api/v1/jobs'
                : undefined;
          if (template !== undefined && answer.status < 300) {
            const made = idOf(answer.text);
            if (template === '/api/v1/jobs' && method === 'POST' && made) {
              acceptedJobs.add(made);
              jobIds.push(made);
            } else if (template.endsWith('/resubmit') && made) {
              acceptedJobs.add(made);
              jobIds.push(made);
            } else if (template.endsWith('/runs') && method === 'POST' && made) {
              acceptedRuns.add(made);
              runIds.push(made);
            }
          }
        }
        // Another owner's id answers a non-admin exactly as an unknown id of its kind: the same
        // request both ways (each with an Idempotency-Key of its own, when it had one), compared
        // with the ids taken out.
        if (FUZZ_OWNER_TOKENS.has(fuzz.token) && otherInPath.length > 0 && method !== 'HEAD') {
          const fresh = (n: number): Record<string, string> =>
            fuzz.headers['idempotency-key'] === undefined
              ? {}
              : { 'idempotency-key': `fuzz-iso-${isolationPairs}-${n}` };
          const [asOther, asUnknown] = [
            await send({ ...request, headers: { ...headers, ...fresh(1) } }),
            await send({ ...request, path: unknownPath, headers: { ...headers, ...fresh(2) } }),
          ];
          isolationPairs++;
          const shown = (text: string, ids: Iterable<string>) => {
            let out = text.replace(/"request_id":"[^"]*"/g, '"request_id":"<r>"');
            for (const id of ids) out = out.replaceAll(decodeURIComponent(id), '<id>').replaceAll(id, '<id>');
            return out;
          };
          const what = `${method} ${path.slice(0, 200)} (another owner's) → ${asOther.status} ${asOther.text.slice(0, 300)}`;
          expect(asOther.status, what).toBe(asUnknown.status);
          expect(shown(asOther.text, replacements.keys()), what).toBe(shown(asUnknown.text, replacements.values()));
        }
      }),
      {
        seed: SEED,
        numRuns: RUNS,
        endOnFailure: false,
        interruptAfterTimeLimit: 240_000,
        markInterruptAsFailure: true,
      },
    );

    const wallSec = (performance.now() - started) / 1000;
    const byStatus = [...statuses.entries()].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`);
    console.log(
      `api fuzz: ${sent} requests in ${wallSec.toFixed(1)} s (slowest ${Math.round(slowestMs)} ms: ${slowest}), seed ${SEED}; ${byStatus.join(', ')}`,
    );
    console.log(`api fuzz: ${acceptedJobs.size} job requests and ${acceptedRuns.size} runs accepted`);
    console.log(`api fuzz: ${isolationPairs} requests naming another owner's ids compared with unknown ones`);
    expect(isolationPairs).toBeGreaterThan(20);
    expect(sent).toBeGreaterThanOrEqual(RUNS);

    // Nothing the API refused is in the history: every job request is one an answer named
    // (or a step of a run an answer named), and so is every run.
    const h = td.daemon.history.store;
    const requests = await listRequests(h, { limit: 1_000_000 });
    // Another owner's request, run and step were made before.
    for (const id of others.jobs) acceptedJobs.add(id);
    for (const id of others.runs) acceptedRuns.add(id);
    const stray = requests.filter(
      (row) => !acceptedJobs.has(row.id) && !(row.runId !== null && acceptedRuns.has(row.runId)),
    );
    expect(stray.map((row) => ({ id: row.id, name: row.name, origin: row.origin }))).toEqual([]);
    const runs = await listRuns(h, { limit: 1_000_000 });
    expect(runs.filter((run) => !acceptedRuns.has(run.id))).toEqual([]);
    // No webhook recorded points inward: every one stored is public or allowed.
    const inwardKept = [...requests, ...runs]
      .map((row) => row.webhookUrl)
      .filter((url) => url !== null && targetTruth.get(url) === 'inward');
    expect(inwardKept).toEqual([]);
    const drawn = [...targetTruth.values()];
    console.log(
      `api fuzz: ${drawn.length} webhook targets drawn (${drawn.filter((t) => t === 'inward').length} inward); ${requests.filter((r) => r.webhookUrl !== null).length} requests kept one`,
    );
    // And what it accepted is there.
    const missing: string[] = [];
    for (const id of acceptedJobs) if ((await getRequest(h, id)) === undefined) missing.push(id);
    expect(missing).toEqual([]);
    // And the daemon still serves.
    expect((await send({ method: 'GET', path: '/healthz', headers: {} })).status).toBe(200);
  }, 300_000);
});

describe('array expressions under generated text', () => {
  it("are read or refused with what to write, in bounded time, listing at most MaxArraySize's indexes", () => {
    let slowestMs = 0;
    fc.assert(
      fc.property(arrayExpression, (text) => {
        // CPU, not wall time: a loaded run shares the cores (a 304 ms wait once failed a 250 ms bound).
        const started = process.cpuUsage();
        let parsed: ReturnType<typeof parseArrayExpression> | undefined;
        let listed: number[] = [];
        try {
          parsed = parseArrayExpression(text, DEFAULT_MAX_ARRAY_SIZE);
          listed = indexesOf(parsed);
        } catch (error) {
          if (!(error instanceof ArraySyntaxError)) throw error;
          // The message says what to write, without echoing a megabyte back.
          expect(error.message.length).toBeLessThan(400);
        }
        const ms = cpuMsSince(started);
        slowestMs = Math.max(slowestMs, ms);
        // Generous: a few milliseconds alone.
        expect(ms, `${text.slice(0, 80)}… (${text.length} chars) took ${ms} ms of CPU`).toBeLessThan(500);
        if (parsed) {
          expect(listed.length).toBeLessThanOrEqual(DEFAULT_MAX_ARRAY_SIZE);
          expect(parsed.maxIndex).toBe(listed.at(-1));
          // What the ranges name, listed the obvious way, where that is cheap enough to compare.
          if (parsed.ranges.length <= 50) {
            const expected = new Set<number>();
            for (const range of parsed.ranges) {
              for (let i = range.start; i <= range.last; i += range.step) expected.add(i);
            }
            expect(listed).toEqual([...expected].sort((a, b) => a - b));
          }
        }
        // Without the limit, reading alone lists nothing: linear in the text.
        const reading = process.cpuUsage();
        try {
          parseArrayExpression(text);
        } catch (error) {
          if (!(error instanceof ArraySyntaxError)) throw error;
        }
        expect(cpuMsSince(reading)).toBeLessThan(250);
      }),
      { seed: SEED, numRuns: Math.min(RUNS, 1000) },
    );
    console.log(`array expressions: slowest ${slowestMs.toFixed(1)} ms of CPU`);
  });
});

/** The webhook_url of a JSON body, when it has one. */
function webhookUrlOf(body: string | Buffer | undefined): string | undefined {
  if (typeof body !== 'string') return undefined;
  try {
    const url = (JSON.parse(body) as { webhook_url?: unknown } | null)?.webhook_url;
    return typeof url === 'string' ? url : undefined;
  } catch {
    return undefined;
  }
}

function idOf(text: string): string | undefined {
  try {
    const id = (JSON.parse(text) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}
