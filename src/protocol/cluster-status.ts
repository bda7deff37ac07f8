/** One gateway's view of the gateways sharing its state (Redis, leader lease, demand shares, quota spending): GET /admin/v1/cluster, the cluster metrics and the dashboard read it. */
export interface ClusterStatus {
  gateway: string;
  redis: { target: string; up: boolean; down_since_ms: number | null; last_error: string | null; commands: number; failures: number };
  leader: { self: boolean; token: number | null; holder: string | null; holder_token: number | null };
  gateways: number;
  shares: Record<string, number>;
  shares_at_ms: number | null;
  quota: { local: number; fetched: number; fail_static: number; fetches: number };
}
