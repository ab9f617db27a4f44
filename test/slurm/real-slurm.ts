import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `../shared/real-slurm` beside the repository, as CI lays it out. */
export const REAL_SLURM_DIR = resolve(
  process.env.SCHEDFLOW_REAL_SLURM_DIR ?? fileURLToPath(new URL('../../../shared/real-slurm', import.meta.url)),
);

/** What `cluster.sh up` writes to its env file. */
export interface RealSlurm {
  url: string;
  slurmConf: string;
  prefix: string;
  aliceJwt: string;
  bobJwt: string;
}
