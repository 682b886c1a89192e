/**
 * "Schedule this notebook…": a dialog that creates a job through the API.
 *
 * The papermill parameters are those of the notebook's cell tagged `parameters`
 * (simple `name = value` lines); the notebook must have a kernel, and unsaved changes are
 * saved first ("Save and schedule").
 */
import { Dialog, showDialog, showErrorMessage, Notification } from '@jupyterlab/apputils';
import { Contents } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { api, IGrants, IJob, IJobChange, INewJob } from './api';
import { el, labelFor } from './dom';

const PRESETS: [string, string][] = [
  ['Every hour', '0 * * * *'],
  ['Every day at 9:00', '0 9 * * *'],
  ['Weekdays at 9:00', '0 9 * * MON-FRI'],
  ['Every Monday at 8:00', '0 8 * * MON'],
  ['First of the month at 6:00', '0 6 1 * *']
];

export interface IParameter {
  name: string;
  value: string;
}

/** `name = value` lines of the cell tagged `parameters` (values as written). */
export function notebookParameters(content: any): IParameter[] {
  const cells: any[] = (content && content.cells) || [];
  const cell = cells.find(c => c.cell_type === 'code' && (c.metadata?.tags ?? []).includes('parameters'));
  if (!cell) {
    return [];
  }
  const source = Array.isArray(cell.source) ? cell.source.join('') : String(cell.source);
  const parameters: IParameter[] = [];
  for (const line of source.split('\n')) {
    const match = /^([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*(.+?)\s*(#.*)?$/.exec(line);
    if (match) {
      parameters.push({ name: match[1], value: match[2] });
    }
  }
  return parameters;
}

/** A Python literal as typed (1, 2.5, 'text', True, None, [1, 2]) as a JSON value. */
export function pythonValue(text: string): unknown {
  const trimmed = text.trim();
  const words: Record<string, unknown> = { True: true, False: false, None: null };
  if (trimmed in words) {
    return words[trimmed];
  }
  const quoted = /^'(.*)'$/s.exec(trimmed);
  if (quoted) {
    return quoted[1].replace(/\\'/g, "'");
  }
  try {
    return JSON.parse(
      trimmed
        .replace(/\bTrue\b/g, 'true')
        .replace(/\bFalse\b/g, 'false')
        .replace(/\bNone\b/g, 'null')
    );
  } catch {
    return trimmed;
  }
}

/** A JSON value as a Python literal, as the dialog shows a parameter ('text', 1, True, None). */
export function pythonLiteral(value: unknown): string {
  if (typeof value === 'string') {
    return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  }
  if (value === true || value === false) {
    return value ? 'True' : 'False';
  }
  if (value === null || value === undefined) {
    return 'None';
  }
  return JSON.stringify(value);
}

/** An ISO instant as the wall time of `timeZone`, as a datetime-local input holds it. */
function wallTime(iso: string, timeZone: string): string {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit'
    }).formatToParts(new Date(iso));
  } catch {
    return iso.slice(0, 16);
  }
  const part = (type: string) => parts.find(p => p.type === type)?.value ?? '00';
  return `${part('year')}-${part('month')}-${part('day')}T${part('hour')}:${part('minute')}`;
}

function timezones(): string[] {
  const intl = Intl as any;
  return typeof intl.supportedValuesOf === 'function' ? intl.supportedValuesOf('timeZone') : ['UTC'];
}

class ScheduleForm extends Widget {
  /** `job`: the job to edit (the form starts from it and shows its other settings too);
   * `notebookOnly`: parameters of the notebook the job does not set, with their defaults. */
  constructor(
    path: string,
    parameters: IParameter[],
    job?: IJob,
    private notebookOnly = new Map<string, string>()
  ) {
    super();
    this.addClass('ak-schedule-form');
    this.path = path;
    const stem = path
      .split('/')
      .pop()!
      .replace(/\.ipynb$/, '');
    const cron = job ? (job.cron ?? PRESETS[1][1]) : PRESETS[1][1];
    this.name = el('input', { className: 'jp-mod-styled', value: job?.name ?? stem, name: 'name' });
    this.cron = el('input', { className: 'jp-mod-styled', value: cron, name: 'cron' });
    this.at = el('input', { className: 'jp-mod-styled', type: 'datetime-local', name: 'at' });
    const soon = new Date(Date.now() + 3600_000);
    soon.setSeconds(0, 0);
    this.at.value = job?.at
      ? wallTime(job.at, job.timezone)
      : new Date(soon.getTime() - soon.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    this.timezone = el('input', {
      className: 'jp-mod-styled',
      name: 'timezone',
      list: 'ak-timezones',
      value: job?.timezone ?? (Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC')
    });
    this.overlap = el(
      'select',
      { className: 'jp-mod-styled', name: 'overlap' },
      el('option', { value: 'forbid' }, 'Skip a run while the previous one is still going'),
      el('option', { value: 'queue' }, 'Queue it until the previous one ends'),
      el('option', { value: 'allow' }, 'Run at once, alongside the previous one')
    );
    const preset = el(
      'select',
      {
        className: 'jp-mod-styled',
        name: 'preset',
        onchange: (event: Event) => {
          const value = (event.target as HTMLSelectElement).value;
          if (value) {
            this.cron.value = value;
          }
        }
      },
      ...PRESETS.map(([label, value]) => el('option', { value, selected: value === cron }, label)),
      el(
        'option',
        { value: '', selected: !PRESETS.some(([, value]) => value === cron) },
        'Custom (edit the cron expression)'
      )
    );
    this.overlap.value = job?.overlap ?? 'forbid';
    this.once = el('input', { type: 'radio', name: 'when', value: 'once', checked: !!job?.at });
    this.recurring = el('input', { type: 'radio', name: 'when', value: 'cron', checked: !job?.at });
    const sync = () => {
      cronRow.hidden = !this.recurring.checked;
      atRow.hidden = !this.once.checked;
    };
    this.once.addEventListener('change', sync);
    this.recurring.addEventListener('change', sync);
    this.cron.setAttribute('aria-label', 'Cron expression (minute hour day month weekday)');
    const cronRow = el('div', { className: 'ak-field' }, labelFor('Repeat', preset), preset, this.cron);
    const atRow = el('div', { className: 'ak-field' }, labelFor('At', this.at), this.at);
    this.grantTools = el('input', {
      className: 'jp-mod-styled',
      name: 'grant-tools',
      placeholder: 'tool names, comma-separated (e.g. run_code)',
      value: (job?.grants?.after_untrusted ?? []).join(', ')
    });
    this.grantHosts = el('input', {
      className: 'jp-mod-styled',
      name: 'grant-hosts',
      placeholder: 'host names, comma-separated (e.g. api.example.com)',
      value: (job?.grants?.hosts ?? []).join(', ')
    });
    this.parameterRows = parameters.map(p => {
      const input = el('input', { className: 'jp-mod-styled', value: p.value, name: `parameter-${p.name}` });
      return { name: p.name, input };
    });
    this.node.append(
      el('p', { className: 'ak-muted' }, `Runs ${path} with papermill, in its own kernel.`),
      el('div', { className: 'ak-field' }, labelFor('Name', this.name), this.name),
      el(
        'div',
        { className: 'ak-field ak-when', role: 'radiogroup', 'aria-label': 'When it runs' },
        el('label', {}, this.recurring, ' On a schedule'),
        el('label', {}, this.once, ' Once')
      ),
      cronRow,
      atRow,
      el(
        'div',
        { className: 'ak-field' },
        labelFor('Timezone', this.timezone),
        this.timezone,
        el('datalist', { id: 'ak-timezones' }, ...timezones().map(tz => el('option', { value: tz })))
      ),
      el('div', { className: 'ak-field' }, labelFor('Overlap', this.overlap), this.overlap),
      el('h4', {}, 'Parameters'),
      this.parameterRows.length
        ? el(
            'div',
            { className: 'ak-parameters' },
            ...this.parameterRows.map(row =>
              el('div', { className: 'ak-field' }, labelFor(row.name, row.input), row.input)
            )
          )
        : el('p', { className: 'ak-muted' }, 'No cell tagged “parameters” in this notebook: it runs as it is.'),
      job ? this.settings(job) : '',
      el('h4', {}, 'After untrusted content'),
      el(
        'p',
        { className: 'ak-muted' },
        'With nobody to approve, a run that read untrusted content (a web page, a tainted cell) runs no ' +
          'writing action and reaches no new host. Allow some in advance:'
      ),
      el('div', { className: 'ak-field' }, labelFor('May run', this.grantTools), this.grantTools),
      el('div', { className: 'ak-field' }, labelFor('May reach', this.grantHosts), this.grantHosts),
      this.error
    );
    sync();
  }

  /** What only an existing job shows: its time limit, notifications and explanations. */
  private settings(job: IJob): HTMLElement {
    this.timeout = el('input', {
      className: 'jp-mod-styled',
      name: 'timeout_s',
      type: 'number',
      min: '1',
      step: 'any',
      value: String(job.timeout_s ?? 3600)
    });
    this.notifyTargets = el('input', {
      className: 'jp-mod-styled',
      name: 'notify-targets',
      placeholder: 'names of notification targets, comma-separated',
      value: (job.notify?.targets ?? []).join(', ')
    });
    this.notifyOn = el(
      'select',
      { className: 'jp-mod-styled', name: 'notify-on' },
      el('option', { value: 'failure' }, 'when a run fails'),
      el('option', { value: 'success' }, 'when a run succeeds'),
      el('option', { value: 'always' }, 'after every run')
    );
    this.notifyOn.value = job.notify?.on ?? 'failure';
    this.notifyOn.setAttribute('aria-label', 'When to notify');
    this.explain = el('input', { type: 'checkbox', name: 'explain', checked: !!job.explain });
    return el(
      'div',
      { className: 'ak-job-settings' },
      el('h4', {}, 'Runs'),
      el('div', { className: 'ak-field' }, labelFor('Time limit (s)', this.timeout), this.timeout),
      el('div', { className: 'ak-field' }, labelFor('Notify', this.notifyTargets), this.notifyTargets, this.notifyOn),
      el(
        'div',
        { className: 'ak-field ak-when' },
        el('label', {}, this.explain, ' Explain a failed run (a small-model call)')
      )
    );
  }

  /** The fields of the form that differ from `job`: what PATCH /jobs/ID is to change. */
  changes(job: IJob): IJobChange {
    const value = this.getValue();
    const change: IJobChange = {};
    if (value.name !== job.name) {
      change.name = value.name;
    }
    if (value.cron !== undefined && (value.cron !== job.cron || job.at)) {
      change.cron = value.cron;
    }
    if (
      value.at !== undefined &&
      (!job.at || value.at !== wallTime(job.at, job.timezone) || value.timezone !== job.timezone)
    ) {
      change.at = value.at;
    }
    if (value.timezone !== job.timezone) {
      change.timezone = value.timezone;
    }
    if (value.overlap !== job.overlap) {
      change.overlap = value.overlap;
    }
    const parameters = withoutUnchangedDefaults(value.parameters ?? {}, this.parameterRows, this.notebookOnly);
    if (JSON.stringify(parameters) !== JSON.stringify(job.parameters ?? {})) {
      change.parameters = parameters;
    }
    if (this.timeout) {
      const timeout = Number(this.timeout.value);
      if (timeout !== job.timeout_s) {
        change.timeout_s = timeout;
      }
    }
    if (this.notifyTargets && this.notifyOn) {
      const targets = this.notifyTargets.value
        .split(',')
        .map(t => t.trim())
        .filter(Boolean);
      const notify = targets.length ? { targets, on: this.notifyOn.value } : null;
      const before = job.notify?.targets?.length ? { targets: job.notify.targets, on: job.notify.on } : null;
      if (JSON.stringify(notify) !== JSON.stringify(before)) {
        change.notify = notify;
      }
    }
    if (this.explain && this.explain.checked !== !!job.explain) {
      change.explain = this.explain.checked;
    }
    const grants = this.grants();
    const before = {
      hosts: [...(job.grants?.hosts ?? [])].sort(),
      after_untrusted: [...(job.grants?.after_untrusted ?? [])].sort()
    };
    if (JSON.stringify(grants ?? { hosts: [], after_untrusted: [] }) !== JSON.stringify(before)) {
      change.grants = grants;
    }
    return change;
  }

  /** The server's refusal, in the dialog. */
  showError(message: string): void {
    this.error.textContent = message;
  }

  getValue(): INewJob {
    const job: INewJob = {
      notebook: this.path,
      name: this.name.value.trim(),
      timezone: this.timezone.value.trim(),
      overlap: this.overlap.value,
      parameters: Object.fromEntries(this.parameterRows.map(row => [row.name, pythonValue(row.input.value)]))
    };
    if (this.once.checked) {
      job.at = this.at.value;
    } else {
      job.cron = this.cron.value.trim();
    }
    const grants = this.grants();
    if (grants) {
      job.grants = grants;
    }
    return job;
  }

  /** The standing grants the form names (null: none), sorted as the server keeps them. */
  private grants(): IGrants | null {
    const names = (input: HTMLInputElement) =>
      input.value
        .split(',')
        .map(n => n.trim())
        .filter(Boolean)
        .sort();
    const grants = { hosts: names(this.grantHosts), after_untrusted: names(this.grantTools) };
    return grants.hosts.length || grants.after_untrusted.length ? grants : null;
  }

  /** Fill the form with what was sent before (after the server refused it). */
  restore(job: INewJob): void {
    this.name.value = job.name ?? this.name.value;
    this.timezone.value = job.timezone ?? this.timezone.value;
    this.overlap.value = job.overlap ?? this.overlap.value;
    this.grantTools.value = (job.grants?.after_untrusted ?? []).join(', ');
    this.grantHosts.value = (job.grants?.hosts ?? []).join(', ');
    if (job.at) {
      this.at.value = job.at;
      this.once.checked = true;
      this.once.dispatchEvent(new Event('change'));
    } else if (job.cron) {
      this.cron.value = job.cron;
    }
  }

  private path: string;
  private name: HTMLInputElement;
  private cron: HTMLInputElement;
  private at: HTMLInputElement;
  private timezone: HTMLInputElement;
  private overlap: HTMLSelectElement;
  private once: HTMLInputElement;
  private recurring: HTMLInputElement;
  private parameterRows: { name: string; input: HTMLInputElement }[];
  private timeout: HTMLInputElement | null = null;
  private notifyTargets: HTMLInputElement | null = null;
  private notifyOn: HTMLSelectElement | null = null;
  private explain: HTMLInputElement | null = null;
  private grantTools: HTMLInputElement;
  private grantHosts: HTMLInputElement;
  private error = el('p', { className: 'ak-form-error', role: 'alert' });
}

/**
 * The dialog opened from a job, to change it: the fields that differ are sent as one PATCH
 * (a new version of the job); a refusal shows in the dialog, which stays open.
 */
export async function editJob(job: IJob, onSaved: () => void, contents?: Contents.IManager): Promise<void> {
  const notebookOnly = contents ? await notebookDefaults(contents, job) : new Map<string, string>();
  const parameters = [
    ...Object.entries(job.parameters ?? {}).map(([name, value]) => ({ name, value: pythonLiteral(value) })),
    ...Array.from(notebookOnly, ([name, value]) => ({ name, value }))
  ];
  const path = job.notebook_path ?? job.notebook ?? job.name;
  let form = new ScheduleForm(path, parameters, job, notebookOnly);
  for (let refused = ''; ;) {
    if (refused) {
      const next = new ScheduleForm(path, parameters, job, notebookOnly);
      carryOver(form.node, next.node);
      next.showError(refused);
      form = next;
    }
    const answer = await showDialog({
      title: `Edit “${job.name}”`,
      body: form,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Save' })],
      focusNodeSelector: 'input[name="name"]'
    });
    if (!answer.button.accept) {
      return;
    }
    const change = form.changes(job);
    if (!Object.keys(change).length) {
      return;
    }
    try {
      const saved = await api.editJob(job.id, change);
      Notification.success(`Saved “${saved.name}” (version ${saved.version ?? ''}).`, { autoClose: 4000 });
      onSaved();
      return;
    } catch (error) {
      refused = (error as Error).message;
    }
  }
}

/**
 * The parameters of the job's notebook (its cell tagged `parameters`) that the job does not
 * set, with their defaults as written; none when the notebook cannot be read.
 */
export async function notebookDefaults(contents: Contents.IManager, job: IJob): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  if (!job.notebook_path) {
    return found;
  }
  try {
    const model = await contents.get(job.notebook_path, { content: true });
    for (const p of notebookParameters(model.content)) {
      if (!(p.name in (job.parameters ?? {}))) {
        found.set(p.name, p.value);
      }
    }
  } catch {
    // moved or unreadable: the job's own parameters are still shown
  }
  return found;
}

/** `values` without the notebook's own parameters left as the notebook has them: those
 * stay the notebook's (a default such as `date.today()` is code, not a value to send). */
export function withoutUnchangedDefaults(
  values: Record<string, unknown>,
  rows: { name: string; input: HTMLInputElement }[],
  notebookOnly: Map<string, string>
): Record<string, unknown> {
  const kept = { ...values };
  for (const row of rows) {
    if (notebookOnly.get(row.name) === row.input.value.trim()) {
      delete kept[row.name];
    }
  }
  return kept;
}

/**
 * What was typed in a closed dialog's form (`from`) into a new one (`to`), field by field
 * (a dialog disposes its body when it closes; its inputs keep their values).
 */
export function carryOver(from: HTMLElement, to: HTMLElement): void {
  for (const old of Array.from(
    from.querySelectorAll<HTMLInputElement | HTMLSelectElement>('input[name], select[name]')
  )) {
    const name = CSS.escape(old.name);
    if (old instanceof HTMLInputElement && (old.type === 'radio' || old.type === 'checkbox')) {
      const twin = to.querySelector<HTMLInputElement>(`input[name="${name}"][value="${CSS.escape(old.value)}"]`);
      if (twin) {
        twin.checked = old.checked;
        twin.dispatchEvent(new Event('change'));
      }
      continue;
    }
    const twin = to.querySelector<HTMLInputElement | HTMLSelectElement>(`[name="${name}"]`);
    if (twin && twin.tagName === old.tagName) {
      twin.value = old.value;
    }
  }
}

/**
 * Open the dialog for the notebook at `path`; create the job when it is accepted.
 * `save`: given when the open notebook has unsaved changes (a scheduled run uses the saved
 * file, so it is saved first, once the person agrees).
 */
export async function scheduleNotebook(
  contents: Contents.IManager,
  path: string,
  save: (() => Promise<void>) | null,
  onCreated: () => void
): Promise<void> {
  if (save && !(await saveFirst(path, save))) {
    return;
  }
  let model: Contents.IModel;
  try {
    model = await contents.get(path, { content: true });
  } catch (error) {
    await showErrorMessage('Schedule this notebook', `Cannot read ${path}: ${(error as Error).message}`);
    return;
  }
  if (!model.content?.metadata?.kernelspec?.name) {
    await showErrorMessage(
      'Schedule this notebook',
      'This notebook has no kernel: open it, choose a kernel and save it, then schedule it.'
    );
    return;
  }
  let form = new ScheduleForm(path, notebookParameters(model.content));
  for (;;) {
    const answer = await showDialog({
      title: 'Schedule this notebook',
      body: form,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Schedule' })],
      focusNodeSelector: 'input[name="name"]'
    });
    if (!answer.button.accept || !answer.value) {
      return;
    }
    try {
      const job = await api.createJob(answer.value);
      const when = job.next_run ? new Date(job.next_run).toLocaleString() : 'never';
      const note = job.scheduler.running ? '' : ` ${job.scheduler.message ?? ''}`;
      Notification.success(`Scheduled “${job.name}”: next run ${when}.${note}`, { autoClose: 6000 });
      onCreated();
      return;
    } catch (error) {
      await showErrorMessage('Schedule this notebook', (error as Error).message);
      const kept = answer.value;
      form = new ScheduleForm(
        path,
        Object.entries(kept.parameters ?? {}).map(([name, value]) => ({
          name,
          value: typeof value === 'string' ? `'${value}'` : JSON.stringify(value)
        }))
      );
      form.restore(kept);
    }
  }
}

/** Ask to save a notebook with unsaved changes, and save it; false: not saved (cancelled or failed). */
async function saveFirst(path: string, save: () => Promise<void>): Promise<boolean> {
  const answer = await showDialog({
    title: 'Schedule this notebook',
    body: `${path} has unsaved changes. A scheduled run uses the saved file: save it now?`,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Save and schedule' })]
  });
  if (!answer.button.accept) {
    return false;
  }
  try {
    await save();
    return true;
  } catch (error) {
    await showErrorMessage('Schedule this notebook', `Cannot save ${path}: ${(error as Error).message}`);
    return false;
  }
}
