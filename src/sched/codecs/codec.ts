import type { ApiVersion } from '../versions.js';
import type { JobCodec } from './job-codec.js';
import { codecV0042 } from './v0.0.42.js';
import { codecV0043 } from './v0.0.43.js';
import { codecV0044 } from './v0.0.44.js';

// In a file of its own: the codecs implement it and this file imports them (no cycle).
export type { JobCodec } from './job-codec.js';

const CODECS: Record<ApiVersion, JobCodec> = {
  'v0.0.42': codecV0042,
  'v0.0.43': codecV0043,
  'v0.0.44': codecV0044,
};

export function codecFor(version: ApiVersion): JobCodec {
  return CODECS[version];
}
