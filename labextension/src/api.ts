/**
 * The server extension's REST API (routes under /agent-kernel/api/).
 *
 * ServerConnection adds the server's token or XSRF header, so every call is
 * authenticated the way JupyterLab's own calls are.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface ISession {
  id: string;
  name: string;
  notebook: string | null;
  notebook_path: string | null;
  state: string;
  model: string | null;
  tokens: number;
  token_limit: number | null;
  cost: number | null;
  parent_id: string | null;
  last_error: string | null;
  created_at: string | null;
  updated_at: string | null;
}

/** One stored message of a session (GET sessions/ID). */
export interface IMessage {
  seq: number;
  turn: number;
  role: string;
  content: unknown[];
  created_at: string | null;
}

export interface ISessionDetail extends ISession {
  messages: IMessage[];
  messages_total: number;
}

/** The settings row's choices as the kernel holds them (agent_kernel/magics/chat.py). */
export interface IPanelDefaults {
  model: string | null;
  approve: string | null;
  thinking: string | null;
  session: string | null;
  new: boolean;
}

/** How full the session's context window is, its cost, and when it is compacted. */
export interface IContextMeter {
  session: string;
  model: string;
  window: number;
  used: number | null;
  compact_at: number;
  compaction: string;
  steps: string[];
  summary_model: string;
  cost: number | null;
  unpriced_calls: number;
  tokens: number;
  token_limit: number;
}

/** What the notebook's kernel answers for the settings row (PanelStateJson). */
export interface IPanelState {
  models: string[];
  default_model: string;
  default_approve: string;
  default_thinking: string;
  defaults: IPanelDefaults;
  meter: IContextMeter | null;
}

const MAX_MODELS = 50;
const MAX_NAME = 200;

const isName = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME;
const isNameOrNull = (v: unknown) => v === null || isName(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

function isMeter(v: any): v is IContextMeter {
  return (
    v !== null &&
    typeof v === 'object' &&
    isName(v.session) &&
    isName(v.model) &&
    isCount(v.window) &&
    v.window > 0 &&
    (v.used === null || isCount(v.used)) &&
    isCount(v.compact_at) &&
    (v.compaction === 'client' || v.compaction === 'server') &&
    Array.isArray(v.steps) &&
    v.steps.length <= 10 &&
    v.steps.every((s: unknown) => typeof s === 'string' && s.length <= 400) &&
    isName(v.summary_model) &&
    (v.cost === null || isCount(v.cost)) &&
    isCount(v.unpriced_calls) &&
    isCount(v.tokens) &&
    isCount(v.token_limit)
  );
}

/** `value` as the kernel's panel state when it has that shape, else null. */
export function panelState(value: unknown): IPanelState | null {
  const v = value as any;
  if (
    !v ||
    typeof v !== 'object' ||
    !Array.isArray(v.models) ||
    v.models.length > MAX_MODELS ||
    !v.models.every(isName)
  ) {
    return null;
  }
  const d = v.defaults;
  if (
    !isName(v.default_model) ||
    !isName(v.default_approve) ||
    !isName(v.default_thinking) ||
    !d ||
    typeof d !== 'object' ||
    !isNameOrNull(d.model) ||
    !isNameOrNull(d.approve) ||
    !isNameOrNull(d.thinking) ||
    !isNameOrNull(d.session) ||
    typeof d.new !== 'boolean' ||
    (d.model !== null && !v.models.includes(d.model)) ||
    (v.meter !== null && !isMeter(v.meter))
  ) {
    return null;
  }
  return v as IPanelState;
}

export interface ISchedulerStatus {
  running: boolean;
  in_server: boolean;
  holder?: string;
  message?: string;
}

export interface IJob {
  id: string;
  name: string;
  kind: string;
  type: string;
  schedule: string;
  cron: string | null;
  at: string | null;
  timezone: string;
  notebook: string | null;
  notebook_path: string | null;
  task: string | null;
  parameters: Record<string, unknown>;
  overlap: string;
  enabled: boolean;
  next_run: string | null;
  last_run: string | null;
  last_status: string | null;
  last_run_id?: string | null;
  created_by?: string | null;
  created_at?: string | null;
  version?: number;
  timeout_s?: number;
  notify?: INotify | null;
  explain?: boolean;
  grants?: IGrants | null;
  granted_by?: string | null;
}

/** A job's standing grants, the person's: what its unattended runs may do after reading
 * untrusted content (the writing tools they may run, the hosts they may reach). */
export interface IGrants {
  hosts: string[];
  after_untrusted: string[];
}

/** Who hears of a job's runs: names of notification targets (never their URLs), and when. */
export interface INotify {
  targets: string[];
  on: string;
}

/** One version of a job: the fields its change changed, who made it, when. */
export interface IJobVersion {
  version: number;
  changed: string[];
  changed_by: string;
  changed_at: string | null;
  definition: Record<string, unknown>;
}

/** What `PATCH /jobs/ID` may change (any subset). */
export interface IJobChange {
  name?: string;
  cron?: string;
  at?: string;
  timezone?: string;
  parameters?: Record<string, unknown>;
  overlap?: string;
  timeout_s?: number;
  notify?: INotify | null;
  explain?: boolean;
  enabled?: boolean;
  grants?: IGrants | null;
}

export interface IRun {
  id: string;
  job_id: string;
  job_name: string | null;
  status: string;
  scheduled_for: string | null;
  started_at: string | null;
  finished_at: string | null;
  seconds: number | null;
  error: string | null;
  output_path: string | null;
  output_notebook: string | null;
  cause?: string;
  attempt?: number;
  job_version?: number | null;
  explanation?: string | null;
  notified?: string | null;
  notify_error?: string | null;
  parameters?: Record<string, unknown> | null;
}

/** A run with the tails of its logs (the runner's, and the kernel's stdout and stderr). */
export interface IRunDetail extends IRun {
  log: { runner?: string; stdout?: string; stderr?: string };
}

/** What changed between two runs of a job (`text`: the whole comparison in words). */
export interface IRunDiff {
  before: string;
  after: string;
  text: string;
  first_error: { cell: number; source: string; error: string } | null;
  changes: { cell: number; source: string; kinds: string[]; diff: string; error: string }[];
}

/** A run's output notebook as a static HTML page (read where the run left it). */
export interface IRunOutput {
  id: string;
  job_name: string;
  status: string;
  html: string;
}

export interface IStats {
  days: number;
  code_runs: number;
  failed: number;
  failures_by_category: Record<string, number>;
  tool_calls: number;
  tool_errors: number;
  tokens: number;
  per_day: { day: string; code_runs: number; failures: number; cost: number | null }[];
  /** The store's size on disk and its growth over the last 7 days (`text`: one line). */
  store: { bytes: number; per_day: number; oldest: string | null; text: string };
}

/** A kept item whose latest write came from a turn that had read untrusted content. */
export interface ITainted {
  kind: string;
  name: string;
  version: number | null;
  session_id: string | null;
  session: string | null;
  turn: number | null;
  sources: string[];
  created_at: string | null;
}

export interface INewJob {
  name?: string;
  notebook: string;
  cron?: string;
  at?: string;
  timezone?: string;
  parameters?: Record<string, unknown>;
  overlap?: string;
  grants?: IGrants;
}

/** An answer the API refused, with the server's message. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'agent-kernel', 'api', path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { message: text };
    }
  }
  if (!response.ok) {
    throw new APIError((data && data.message) || response.statusText, response.status);
  }
  return data as T;
}

export const api = {
  sessions: (notebook?: string) =>
    request<{ sessions: ISession[] }>(notebook ? `sessions?notebook=${encodeURIComponent(notebook)}` : 'sessions'),
  session: (id: string) => request<ISessionDetail>(`sessions/${encodeURIComponent(id)}`),
  jobs: () => request<{ jobs: IJob[]; scheduler: ISchedulerStatus }>('jobs'),
  createJob: (job: INewJob) =>
    request<IJob & { scheduler: ISchedulerStatus }>('jobs', {
      method: 'POST',
      body: JSON.stringify(job)
    }),
  setEnabled: (id: string, enabled: boolean) =>
    request<IJob>(`jobs/${id}`, {
      method: 'PATCH',
      body: JSON.stringify({ enabled })
    }),
  deleteJob: (id: string) => request<{ deleted: boolean }>(`jobs/${id}`, { method: 'DELETE' }),
  runNow: (id: string) =>
    request<IRun & { scheduler: ISchedulerStatus }>(`jobs/${id}/run`, {
      method: 'POST'
    }),
  runs: (limit = 30) => request<{ runs: IRun[] }>(`runs?limit=${limit}`),
  job: (id: string) => request<IJob>(`jobs/${id}`),
  editJob: (id: string, change: IJobChange) =>
    request<IJob>(`jobs/${id}`, { method: 'PATCH', body: JSON.stringify(change) }),
  versions: (id: string) => request<{ id: string; version: number; versions: IJobVersion[] }>(`jobs/${id}/versions`),
  runNowWith: (id: string, parameters: Record<string, unknown>) =>
    request<IRun & { scheduler: ISchedulerStatus }>(`jobs/${id}/run`, {
      method: 'POST',
      body: JSON.stringify({ parameters })
    }),
  jobRuns: (id: string, limit = 20) => request<{ runs: IRun[] }>(`runs?job=${encodeURIComponent(id)}&limit=${limit}`),
  run: (id: string) => request<IRunDetail>(`runs/${id}`),
  explainRun: (id: string) =>
    request<IRunDetail>(`runs/${id}`, { method: 'POST', body: JSON.stringify({ action: 'explain' }) }),
  cancelRun: (id: string) =>
    request<{ id: string; status: string }>(`runs/${id}`, {
      method: 'POST',
      body: JSON.stringify({ action: 'cancel' })
    }),
  runDiff: (id: string, other?: string) =>
    request<IRunDiff>(`runs/${id}/diff${other ? `?other=${encodeURIComponent(other)}` : ''}`),
  runOutput: (id: string) => request<IRunOutput>(`runs/${id}/output`),
  openRun: (id: string) =>
    request<{ path: string | null }>(`runs/${id}`, {
      method: 'POST',
      body: JSON.stringify({ action: 'open' })
    }),
  stats: (days = 14) => request<IStats>(`stats?days=${days}`),
  tainted: () => request<{ items: ITainted[]; total: number }>('tainted'),
  clearTainted: (kind: string, name: string) =>
    request<{ cleared: number }>('tainted/clear', {
      method: 'POST',
      body: JSON.stringify({ kind, name })
    })
};
