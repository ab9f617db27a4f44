import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ClusterDecodeError,
  clusterDecoderFor,
  decodeNode,
  joinNodes,
  joinPartitions,
} from '../../src/sched/cluster-reads.js';
import { codecFor } from '../../src/sched/codecs/codec.js';
import { expandHostlist } from '../../src/sched/hostlist.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';

type Json = Record<string, unknown>;

/** Bodies Slurm 25.11.7 answered while job 1276 ran on `localhost` (2 CPUs, with another
 *  helper's 1275) and 1277 waited in `lab-owner`, a maintenance reservation `h3-cap` ahead. */
function body(what: string, version: string): Json {
  const url = new URL(`../fixtures/real-slurm-25.11/cluster_${what}_${version}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')) as Json;
}
const list = (what: string, version: string) => body(what, version)[what] as unknown[];

describe.each(SUPPORTED_VERSIONS)('cluster reads of Slurm 25.11.7, %s', (version) => {
  const decode = clusterDecoderFor(version);

  it('decodes the partitions: state, nodes, limits and who may use them', () => {
    const partitions = list('partitions', version).map(decode.partition);
    expect(partitions.map((p) => p.name)).toEqual(['debug', 'lab-owner']);
    const lab = partitions[1];
    expect(lab).toMatchObject({
      state: 'UP',
      stateFlags: ['UP'],
      nodeList: 'localhost',
      nodeCount: 1,
      cpusTotal: 2,
      limits: {
        maxTime: 'infinite',
        defaultTime: null,
        maxMemoryPerNodeMb: null,
        maxMemoryPerCpuMb: null,
        maxNodes: null,
        maxCpusPerNode: null,
      },
      access: { allowedAccounts: ['lab'], deniedAccounts: [], allowedGroups: [], allowedQos: [], deniedQos: [] },
    });
    expect(partitions[0]?.access.allowedAccounts).toEqual([]);
  });

  it('decodes the node: state, CPUs and memory allocated, partitions', () => {
    const [node] = list('nodes', version).map(decode.node);
    expect(node).toMatchObject({
      name: 'localhost',
      state: 'ALLOCATED',
      stateFlags: ['ALLOCATED'],
      reason: null,
      cpus: 2,
      allocatedCpus: 2,
      memoryMb: 23081,
      allocatedMemoryMb: 512,
      features: [],
      gres: '',
      partitions: ['debug', 'lab-owner'],
    });
  });

  it('decodes the reservation', () => {
    const [res] = list('reservations', version).map(decode.reservation);
    expect(res).toEqual({
      name: 'h3-cap',
      startTime: 1795939419,
      endTime: 1795941219,
      nodeList: 'localhost',
      nodeCount: 1,
      coreCount: 2,
      flags: ['MAINT', 'SPEC_NODES'],
      users: ['alice'],
      accounts: [],
      groups: [],
      partition: null,
      tres: 'cpu=2',
    });
  });

  it('joins the queue into partitions and nodes as sinfo counts them', () => {
    const jobs = list('jobs', version).map((j) => codecFor(version).decodeControllerJob(j));
    const nodes = list('nodes', version).map(decode.node);
    const partitions = joinPartitions(list('partitions', version).map(decode.partition), nodes, jobs);
    expect(partitions.map((p) => [p.name, p.cpus, p.memoryMb, p.jobs])).toEqual([
      [
        'debug',
        { total: 2, allocated: 2, idle: 0, other: 0 },
        { total: 23081, allocated: 512 },
        { running: 2, pending: 0 },
      ],
      [
        'lab-owner',
        { total: 2, allocated: 2, idle: 0, other: 0 },
        { total: 23081, allocated: 512 },
        { running: 0, pending: 1 },
      ],
    ]);
    expect(joinNodes(nodes, jobs).map((n) => [n.name, n.available, n.jobIds])).toEqual([
      ['localhost', true, [1275, 1276]],
    ]);
  });
});

describe('cluster joins', () => {
  const node = (state: string[], alloc: number) =>
    decodeNode({ name: 'n1', state, cpus: 4, alloc_cpus: alloc, real_memory: 1000, partitions: ['p'] });

  it('counts the free CPUs of a drained or down node as other, not idle', () => {
    const p = { name: 'p', partition: { state: ['UP'] } };
    const [drained] = joinPartitions([clusterDecoderFor('v0.0.44').partition(p)], [node(['MIXED', 'DRAIN'], 1)], []);
    expect(drained?.cpus).toEqual({ total: 4, allocated: 1, idle: 0, other: 3 });
    const [idle] = joinPartitions([clusterDecoderFor('v0.0.44').partition(p)], [node(['IDLE'], 0)], []);
    expect(idle?.cpus).toEqual({ total: 4, allocated: 0, idle: 4, other: 0 });
  });

  it('keeps a drained node’s reason and who set it', () => {
    const n = decodeNode({
      name: 'n1',
      state: ['IDLE', 'DRAIN'],
      reason: 'disk swap',
      reason_set_by_user: 'root',
      reason_changed_at: { set: true, infinite: false, number: 1795000000 },
    });
    expect(n).toMatchObject({ state: 'IDLE', reason: 'disk swap', reasonSetBy: 'root', reasonSince: 1795000000 });
  });

  it('names the member of a record it cannot read', () => {
    expect(() => decodeNode({ name: 'n1', cpus: 'four' })).toThrow(ClusterDecodeError);
    expect(() => decodeNode({ name: 'n1', cpus: 'four' })).toThrow(/cpus/);
  });

  it('expands Slurm host lists', () => {
    expect(expandHostlist('node[01-03,10],gpu1')).toEqual(['node01', 'node02', 'node03', 'node10', 'gpu1']);
    expect(expandHostlist('localhost')).toEqual(['localhost']);
    expect(expandHostlist('')).toEqual([]);
    expect(expandHostlist(null)).toEqual([]);
  });
});
