import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv';
import spec42 from './openapi/slurmrestd-openapi-v0042.json' with { type: 'json' };
import spec43 from './openapi/slurmrestd-openapi-v0043.json' with { type: 'json' };
import spec44 from './openapi/slurmrestd-openapi-v0044.json' with { type: 'json' };
import type { ApiVersion } from './versions.js';

// ajv is published as CommonJS; createRequire gives its constructor without interop guesswork.
// Required on the first validation, not at import: `schedflow sched ping`, `jobs` or `cancel`
// validate nothing, and ajv's sixty modules were a tenth of their start-up.
const require = createRequire(import.meta.url);

type Json = Record<string, unknown>;

/** The OpenAPI documents slurmrestd generates, one per data parser (copied from upstream). */
const SPECS: Record<ApiVersion, unknown> = { 'v0.0.42': spec42, 'v0.0.43': spec43, 'v0.0.44': spec44 };

type SchemaMap = Record<string, { properties?: Json } | undefined>;

const descFields = new Map<ApiVersion, ReadonlySet<string>>();

/** Member names of the version's `job_desc_msg`: what the `job` of a submission may hold. */
export function jobDescFields(version: ApiVersion): ReadonlySet<string> {
  let fields = descFields.get(version);
  if (!fields) {
    const schemas = (SPECS[version] as { components: { schemas: SchemaMap } }).components.schemas;
    fields = new Set(Object.keys(schemas[`${version}_job_desc_msg`]?.properties ?? {}));
    descFields.set(version, fields);
  }
  return fields;
}

/**
 * slurmrestd's generated documents name some nested requirements as slash paths
 * (`"nodes/count"`). No body has such a key: move each one into the inline
 * object it belongs to, or drop it when that object is a `$ref`.
 */
function fixSlashRequired(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) fixSlashRequired(item);
    return;
  }
  if (!node || typeof node !== 'object') return;
  const schema = node as Json;
  const required = schema.required;
  const properties = schema.properties as Record<string, Json> | undefined;
  if (Array.isArray(required) && required.some((r) => typeof r === 'string' && r.includes('/'))) {
    const kept: string[] = [];
    for (const entry of required as string[]) {
      const slash = entry.indexOf('/');
      if (slash < 0) {
        kept.push(entry);
        continue;
      }
      const head = entry.slice(0, slash);
      const rest = entry.slice(slash + 1);
      const child = properties?.[head];
      if (child && !('$ref' in child) && child.type === 'object') {
        child.required = [...((child.required as string[] | undefined) ?? []), rest];
      }
    }
    schema.required = kept;
  }
  for (const value of Object.values(schema)) fixSlashRequired(value);
}

/**
 * Real slurmrestd sends `null` for some members the documents type as objects: read them as
 * absent. A value without any comes back as it is, not copied: most records have none, and
 * copying every object of every record was a tenth of decoding a mass end's accounting.
 */
export function withoutNulls(value: unknown): unknown {
  if (!value || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const member = value[i];
      const clean = withoutNulls(member);
      if (clean !== member && !out) out = value.slice(0, i);
      out?.push(clean);
    }
    return out ?? value;
  }
  let out: Json | undefined;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const member = (value as Json)[key];
    const clean = member === null ? undefined : withoutNulls(member);
    if (clean !== member && !out) {
      // The members before this one were clean: copied as they are.
      out = {};
      for (const before in value) {
        if (before === key) break;
        if (Object.hasOwn(value, before)) out[before] = (value as Json)[before];
      }
    }
    if (out && member !== null) out[key] = clean;
  }
  return out ?? value;
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

let ajv: import('ajv').default | undefined;
const compiled = new Map<string, ValidateFunction>();

function instance(): import('ajv').default {
  if (ajv) return ajv;
  const Ajv = require('ajv') as typeof import('ajv').default;
  ajv = new Ajv({ strict: false, allErrors: true });
  ajv.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && n >= INT32_MIN && n <= INT32_MAX,
  });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: () => true });
  for (const [version, spec] of Object.entries(SPECS)) {
    const copy = structuredClone(spec) as Json;
    fixSlashRequired(copy.components);
    ajv.addSchema({ components: copy.components }, `slurmrestd-${version}`);
  }
  return ajv;
}

export interface ValidationResult {
  ok: boolean;
  /** Readable problems, `path: message`. */
  errors: string[];
}

function describe(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => `${e.instancePath || '(root)'}: ${e.message ?? 'invalid'}`);
}

/**
 * Validates a body against a schema of the version's slurmrestd document,
 * e.g. `validateAgainstSpec('v0.0.44', 'openapi_job_info_resp', body)`.
 * The version prefix of schema names is added here.
 */
export function validateAgainstSpec(version: ApiVersion, schemaName: string, body: unknown): ValidationResult {
  const key = `${version}#${schemaName}`;
  let validate = compiled.get(key);
  if (!validate) {
    const ref = `slurmrestd-${version}#/components/schemas/${version}_${schemaName}`;
    validate = instance().compile({ $ref: ref });
    compiled.set(key, validate);
  }
  const ok = validate(withoutNulls(body));
  return { ok, errors: ok ? [] : describe(validate.errors) };
}
