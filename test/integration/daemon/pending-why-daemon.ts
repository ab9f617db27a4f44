import { startTestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { startSim } from '../../helpers/sim.js';
import { spec } from './daemon-files.js';

/**
 * What the tests of a pending job's details cost start with: a one-CPU simulator behind a proxy
 * that records every request, and a daemon reading the pending jobs' details every second (30 s
 * by default), so a test need not wait.
 */
export async function startWaitingDaemon(redisUrl: string) {
  const own = await startSim({ cpus: 1 });
  const proxy = await startFlakyProxy(own.url);
  const daemon = await startTestDaemon(proxy.url, redisUrl, { pendingDetailsEveryMs: 1000 });
  const submit = (name: string, script: string) =>
    daemon.daemon.submit({
      spec: spec(own, { name, script, time_limit: 5 }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
  return {
    proxy,
    daemon,
    submit,
    async stop(): Promise<void> {
      await daemon.stop();
      await proxy.close();
      await own.stop();
    },
  };
}
