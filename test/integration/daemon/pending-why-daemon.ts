import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { spec } from './daemon-files.js';

/** Submits a job of a 5-minute limit to `sim` through the daemon, as the API would: its request id. */
export function pendingSubmitter(td: TestDaemon, sim: TestSim) {
  return (name: string, script: string) =>
    td.daemon.submit({
      spec: spec(sim, { name, script, time_limit: 5 }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
}

/**
 * What the tests of a pending job's details cost start with: a one-CPU simulator behind a proxy
 * that records every request, and a daemon reading the pending jobs' details every second (30 s
 * by default), so a test need not wait.
 */
export async function startWaitingDaemon(redisUrl: string) {
  const own = await startSim({ cpus: 1 });
  const proxy = await startFlakyProxy(own.url);
  const daemon = await startTestDaemon(proxy.url, redisUrl, { pendingDetailsEveryMs: 1000 });
  return {
    proxy,
    daemon,
    submit: pendingSubmitter(daemon, own),
    async stop(): Promise<void> {
      await daemon.stop();
      await proxy.close();
      await own.stop();
    },
  };
}
