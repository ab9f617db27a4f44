/**
 * The simulated controller's reservations: what `scontrol create reservation` made, kept as
 * slurmctld reports them. They are shown only; the simulator's scheduler does not hold jobs
 * back for them (a real MAINT reservation would keep its nodes' jobs from starting).
 */
export interface SimReservation {
  name: string;
  /** Unix seconds. */
  startTime: number;
  endTime: number;
  users: string[];
  accounts: string[];
  /** `MAINT`, `IGNORE_JOBS`…; Slurm adds `SPEC_NODES` to one made with `Nodes=`. */
  flags: string[];
  partition: string | null;
}

export class SimReservations {
  private readonly byName = new Map<string, SimReservation>();

  list(): SimReservation[] {
    return [...this.byName.values()].sort((a, b) => a.startTime - b.startTime || a.name.localeCompare(b.name));
  }

  set(reservation: SimReservation): void {
    this.byName.set(reservation.name, reservation);
  }

  delete(name: string): boolean {
    return this.byName.delete(name);
  }
}
