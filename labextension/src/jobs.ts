/**
 * The jobs manager of the Agent dashboard: one job's detail (its schedule in words,
 * parameters, notifications, version history), its runs (status, duration, error,
 * explanation; logs, output notebook, diff against the last successful run) and what can
 * be done with it (pause or resume, run now, run now with other parameters, edit).
 *
 * Everything the server sends is put in as text; a run's output notebook goes into an
 * iframe sandboxed without scripts (an opaque origin), as the panel's "Open output" does.
 *
 * Also here: the toast when a run fails (FailureWatcher), once per run.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  MainAreaWidget,
  Notification,
  showDialog,
  showErrorMessage,
  ToolbarButton
} from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { api, IGrants, IJob, IJobVersion, IRun, IRunDetail, IRunOutput } from './api';
import { actionButton, duration, el, keepFocus, labelFor, local, relative } from './dom';
import { readableActor } from './names';
import { carryOver, editJob, notebookDefaults, pythonLiteral, pythonValue, withoutUnchangedDefaults } from './schedule';

const FAILED = new Set(['FAILED', 'TIMED_OUT', 'LOST']);
const ACTIVE = new Set(['QUEUED', 'RUNNING']);

/** The section of the panel that shows one job in full; the panel hands it its job list. */
export class JobsManager {
  readonly node = el('section', { className: 'ak-section ak-jobs-manager' });

  constructor(
    private app: JupyterFrontEnd,
    private onChanged: () => void
  ) {
    keepFocus(this.node);
  }

  /** Clicking a job in `list` (its rows carry data-job = the job's name) shows it here. */
  follow(list: HTMLElement): void {
    // The poll redraws the list and the lists beside it (their container, the dashboard).
    keepFocus(list.parentElement ?? list);
    keepFocus(list);
    list.addEventListener('click', event => {
      const target = event.target as HTMLElement;
      if (target.closest('button')) {
        return;
      }
      const row = target.closest('[data-job]');
      const job = this.jobs.find(j => j.name === row?.getAttribute('data-job'));
      if (job) {
        void this.show(job.id);
      }
    });
  }

  /** The panel's latest job list (each poll): redraw the chosen job from it. */
  async update(jobs: IJob[]): Promise<void> {
    this.jobs = jobs;
    if (this.selected && !jobs.some(j => j.id === this.selected)) {
      this.selected = null;
    }
    await this.draw();
  }

  /** Show the job `id` (and fetch its versions and runs). */
  async show(id: string | null): Promise<void> {
    this.selected = id;
    this.openRun = null;
    await this.draw();
    if (id) {
      this.node.scrollIntoView({ block: 'nearest' });
    }
  }

  /**
   * Fetch the chosen job's versions and runs and redraw, unless nothing changed (the panel
   * polls: a redraw would replace the buttons under the pointer). Of draws that overlap,
   * the one started last that has finished is shown.
   */
  private async draw(): Promise<void> {
    const seq = ++this.started;
    const job = this.jobs.find(j => j.id === this.selected);
    let versions: IJobVersion[] = [];
    let runs: IRun[] = [];
    let detail: IRunDetail | null = null;
    let failure = '';
    if (job) {
      try {
        [versions, runs] = await Promise.all([
          api.versions(job.id).then(v => v.versions),
          api.jobRuns(job.id).then(r => r.runs)
        ]);
        if (this.openRun && runs.some(r => r.id === this.openRun)) {
          detail = await api.run(this.openRun);
        }
      } catch (error) {
        failure = (error as Error).message;
      }
    }
    if (seq < this.shown || (job && job.id !== this.selected)) {
      return; // a later draw is shown already, or another job was chosen meanwhile
    }
    this.shown = seq;
    const names = this.jobs.map(j => [j.id, j.name]);
    const key = JSON.stringify([names, this.selected, job, versions, runs, detail, failure]);
    if (key === this.drawnKey) {
      return;
    }
    this.drawnKey = key;
    const chooser = el(
      'select',
      {
        className: 'ak-select',
        name: 'job',
        title: 'The job to show',
        'aria-label': 'The job to show',
        onchange: (event: Event) => void this.show((event.target as HTMLSelectElement).value || null)
      },
      el('option', { value: '', selected: !job }, this.jobs.length ? 'Choose a job…' : 'No jobs'),
      ...this.jobs.map(j => el('option', { value: j.id, selected: j.id === job?.id }, j.name))
    );
    const head = el('h3', {}, 'Job ', chooser);
    if (!job) {
      this.node.replaceChildren(head);
    } else if (failure) {
      this.node.replaceChildren(head, el('p', { className: 'ak-error' }, failure));
    } else {
      this.node.replaceChildren(
        head,
        el(
          'div',
          { className: 'ak-job-detail', 'data-job-id': job.id },
          this.summary(job),
          this.actions(job),
          this.parameters(job),
          this.history(versions),
          this.runList(job, runs, detail)
        )
      );
    }
  }

  private summary(job: IJob): HTMLElement {
    const fact = (label: string, value: string, title?: string) =>
      el('tr', { title }, el('th', { scope: 'row' }, label), el('td', {}, value));
    const notify =
      job.notify && job.notify.targets?.length ? `${job.notify.targets.join(', ')} (on ${job.notify.on})` : 'nobody';
    return el(
      'table',
      { className: 'ak-figures ak-job-facts' },
      fact('Name', job.name),
      fact('Schedule', job.schedule, job.cron ?? job.at ?? ''),
      fact('State', job.enabled ? `active · next ${local(job.next_run)}` : 'paused', relative(job.next_run)),
      job.notebook_path || job.notebook ? fact('Notebook', job.notebook_path ?? job.notebook ?? '') : null,
      job.task ? fact('Task', job.task) : null,
      fact('Overlap', job.overlap),
      job.timeout_s !== undefined ? fact('Time limit', duration(job.timeout_s)) : null,
      fact('Notifies', notify, 'Notification targets by name: their URLs stay on the server'),
      fact('Explains failures', job.explain ? 'yes' : 'no, on demand'),
      fact('Unattended runs', grantsLine(job.grants), job.granted_by ? `Set by ${job.granted_by}` : GRANTS_HELP),
      job.version !== undefined ? fact('Version', String(job.version)) : null,
      job.created_by
        ? fact('Created by', readableActor(job.created_by), `${job.created_by} · ${local(job.created_at ?? null)}`)
        : null
    );
  }

  private actions(job: IJob): HTMLElement {
    return el(
      'div',
      { className: 'ak-actions ak-job-actions' },
      this.button(job.enabled ? 'Pause' : 'Resume', () => api.setEnabled(job.id, !job.enabled)),
      this.button('Run now', () => api.runNow(job.id)),
      job.kind === 'notebook' ? this.button('Run with…', () => this.runWith(job)) : null,
      job.kind === 'notebook'
        ? this.button('Edit…', () => editJob(job, () => this.changed(), this.app.serviceManager.contents))
        : null
    );
  }

  private parameters(job: IJob): HTMLElement {
    const entries = Object.entries(job.parameters ?? {});
    return el(
      'div',
      { className: 'ak-job-parameters' },
      el('h4', {}, 'Parameters'),
      entries.length
        ? el(
            'table',
            { className: 'ak-figures' },
            ...entries.map(([name, value]) =>
              el('tr', {}, el('th', { scope: 'row' }, name), el('td', {}, pythonLiteral(value)))
            )
          )
        : el('p', { className: 'ak-muted' }, 'None: the notebook runs with its own values.')
    );
  }

  private history(versions: IJobVersion[]): HTMLElement {
    return el(
      'div',
      { className: 'ak-job-versions' },
      el('h4', {}, 'Versions'),
      el(
        'ul',
        { className: 'ak-list' },
        ...versions.map(v =>
          el(
            'li',
            { className: 'ak-version', 'data-version': String(v.version), title: relative(v.changed_at) },
            el(
              'div',
              { className: 'ak-row' },
              el('strong', {}, `v${v.version}`),
              el('span', {}, v.changed.length ? `changed ${v.changed.join(', ')}` : 'created'),
              el(
                'span',
                { className: 'ak-muted', title: v.changed_by },
                `by ${readableActor(v.changed_by)} · ${local(v.changed_at)}`
              )
            )
          )
        )
      )
    );
  }

  private runList(job: IJob, runs: IRun[], detail: IRunDetail | null): HTMLElement {
    const rows = runs.map(run => {
      const open = detail && detail.id === run.id ? detail : null;
      const finished = !ACTIVE.has(run.status) && run.status !== 'SKIPPED';
      return el(
        'li',
        { className: 'ak-run ak-job-run', 'data-run': run.id },
        el(
          'div',
          { className: 'ak-row' },
          el('span', { className: `ak-status ak-status-${run.status.toLowerCase()}` }, run.status),
          el(
            'span',
            { title: relative(run.started_at ?? run.scheduled_for) },
            local(run.started_at ?? run.scheduled_for)
          ),
          el('span', { className: 'ak-muted' }, duration(run.seconds)),
          run.job_version
            ? el('span', { className: 'ak-muted', title: 'The version of the job it ran' }, `v${run.job_version}`)
            : null,
          run.cause && run.cause !== 'schedule' ? el('span', { className: 'ak-muted' }, run.cause) : null
        ),
        run.parameters && Object.keys(run.parameters).length
          ? el(
              'div',
              { className: 'ak-row ak-muted' },
              'with ' +
                Object.entries(run.parameters)
                  .map(([k, v]) => `${k} = ${pythonLiteral(v)}`)
                  .join(', ')
            )
          : null,
        run.error ? el('div', { className: 'ak-row ak-error', title: run.error }, run.error.split('\n')[0]) : null,
        run.explanation ? el('div', { className: 'ak-explanation' }, run.explanation) : null,
        run.notify_error ? el('div', { className: 'ak-row ak-warning' }, `Not notified: ${run.notify_error}`) : null,
        el(
          'div',
          { className: 'ak-actions' },
          finished || run.status === 'RUNNING'
            ? this.button(open ? 'Hide logs' : 'Logs', () => {
                this.openRun = open ? null : run.id;
                return Promise.resolve();
              })
            : null,
          finished && run.output_path ? this.button('Output', () => openRunOutput(this.app, run)) : null,
          finished && run.output_path ? this.button('Open a copy', () => openCopy(this.app, run)) : null,
          FAILED.has(run.status) && !run.explanation ? this.button('Explain', () => api.explainRun(run.id)) : null,
          finished && run.output_path ? this.button('Diff', () => showDiff(run)) : null,
          ACTIVE.has(run.status) ? this.button('Cancel', () => api.cancelRun(run.id)) : null
        ),
        open ? logs(open) : null
      );
    });
    return el(
      'div',
      { className: 'ak-job-runs' },
      el('h4', {}, 'Runs'),
      rows.length ? el('ul', { className: 'ak-list' }, ...rows) : el('p', { className: 'ak-muted' }, 'No runs yet.')
    );
  }

  /** "Run with…": a run now with other parameters (the job keeps its own). */
  private async runWith(job: IJob): Promise<void> {
    const notebookOnly = await notebookDefaults(this.app.serviceManager.contents, job);
    let form = new ParametersForm(job.parameters ?? {}, notebookOnly);
    for (let refused = ''; ;) {
      if (refused) {
        const next = new ParametersForm(job.parameters ?? {}, notebookOnly);
        carryOver(form.node, next.node);
        next.showError(refused);
        form = next;
      }
      const answer = await showDialog({
        title: `Run “${job.name}” now with…`,
        body: form,
        buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Run now' })],
        focusNodeSelector: 'input'
      });
      if (!answer.button.accept || !answer.value) {
        return;
      }
      try {
        await api.runNowWith(job.id, answer.value);
        Notification.info(`Queued a run of “${job.name}” with other parameters.`, { autoClose: 4000 });
        return;
      } catch (error) {
        refused = (error as Error).message;
      }
    }
  }

  private changed(): void {
    this.onChanged();
  }

  private button(label: string, action: () => Promise<unknown>): HTMLButtonElement {
    return actionButton(label, action, () => this.onChanged());
  }

  private jobs: IJob[] = [];
  private selected: string | null = null;
  private openRun: string | null = null;
  private started = 0;
  private shown = 0;
  private drawnKey = '';
}

const GRANTS_HELP =
  'With nobody to approve, a run that read untrusted content (a web page, a tainted cell) runs no writing ' +
  'action and reaches no new host, unless its owner allowed it here in advance (Edit…).';

/** What a job's runs may do after untrusted content, in one line (its standing grants). */
export function grantsLine(grants: IGrants | null | undefined): string {
  const tools = grants?.after_untrusted ?? [];
  const hosts = grants?.hosts ?? [];
  if (!tools.length && !hosts.length) {
    return 'After untrusted content, writing actions and new hosts are refused';
  }
  return `After untrusted content may: ${tools.join(', ') || 'nothing'}; hosts: ${hosts.join(', ') || 'none'}`;
}

function logs(run: IRunDetail): HTMLElement {
  const parts = (['runner', 'stdout', 'stderr'] as const).filter(name => run.log[name]);
  return el(
    'div',
    { className: 'ak-run-logs' },
    parts.length
      ? el(
          'div',
          {},
          ...parts.map(name =>
            el(
              'details',
              { className: `ak-log ak-log-${name}`, open: true },
              el('summary', {}, { runner: 'Runner', stdout: 'Kernel stdout', stderr: 'Kernel stderr' }[name]),
              el('pre', {}, run.log[name] ?? '')
            )
          )
        )
      : el('p', { className: 'ak-muted' }, 'No logs on disk for this run.')
  );
}

/** The form of "Run with…": the job's parameters as Python literals, to change. */
class ParametersForm extends Widget {
  /** `notebookOnly`: the notebook's parameters the job does not set, with their defaults. */
  constructor(
    parameters: Record<string, unknown>,
    private notebookOnly: Map<string, string>
  ) {
    super();
    this.addClass('ak-schedule-form');
    const shown = [...Object.entries(parameters).map(([name, value]) => [name, pythonLiteral(value)]), ...notebookOnly];
    this.rows = shown.map(([name, value]) => ({
      name,
      input: el('input', { className: 'jp-mod-styled', name: `parameter-${name}`, value })
    }));
    this.node.append(
      el('p', { className: 'ak-muted' }, 'This run only: the job keeps its parameters. Values are Python literals.'),
      ...this.rows.map(row => el('div', { className: 'ak-field' }, labelFor(row.name, row.input), row.input)),
      this.rows.length ? '' : el('p', { className: 'ak-muted' }, 'The job has no parameters.'),
      this.error
    );
  }

  getValue(): Record<string, unknown> {
    const values = Object.fromEntries(this.rows.map(row => [row.name, pythonValue(row.input.value)]));
    return withoutUnchangedDefaults(values, this.rows, this.notebookOnly);
  }

  showError(message: string): void {
    this.error.textContent = message;
  }

  private rows: { name: string; input: HTMLInputElement }[];
  private error = el('p', { className: 'ak-form-error', role: 'alert' });
}

/** What changed between the run and its job's last successful run before it. */
async function showDiff(run: IRun): Promise<void> {
  const diff = await api.runDiff(run.id);
  await showDialog({
    title: `Run ${run.id} against run ${diff.before}`,
    body: new TextBody(diff.text, 'ak-run-diff'),
    buttons: [Dialog.okButton({ label: 'Close' })]
  });
}

class TextBody extends Widget {
  constructor(text: string, className: string) {
    super();
    this.addClass(className);
    this.node.append(el('pre', {}, text));
  }
}

const outputs = new Map<string, MainAreaWidget>();

/** A run's output notebook, read-only where the run left it: no copy, no kernel. */
export async function openRunOutput(app: JupyterFrontEnd, run: IRun): Promise<void> {
  const shown = outputs.get(run.id);
  if (shown && !shown.isDisposed) {
    app.shell.activateById(shown.id);
    return;
  }
  const page = await api.runOutput(run.id);
  const widget = new MainAreaWidget({ content: new OutputView(page) });
  widget.id = `ak-job-run-output-${run.id}`;
  widget.addClass('ak-run-output');
  widget.title.label = `${page.job_name} (run output, read-only)`;
  widget.title.caption = `The output notebook of run ${run.id} (${page.status}), as the run left it`;
  widget.title.closable = true;
  widget.toolbar.addItem(
    'openCopy',
    new ToolbarButton({
      label: 'Open a copy to edit',
      tooltip: 'Copy the output notebook into this project and open it with a kernel',
      onClick: () =>
        void openCopy(app, run).catch(error => showErrorMessage('Open a copy to edit', (error as Error).message))
    })
  );
  outputs.set(run.id, widget);
  app.shell.add(widget, 'main');
  app.shell.activateById(widget.id);
}

async function openCopy(app: JupyterFrontEnd, run: IRun): Promise<void> {
  const { path } = await api.openRun(run.id);
  if (!path) {
    throw new Error('This run left no output notebook.');
  }
  await app.commands.execute('docmanager:open', { path });
}

/** The output page in an iframe sandboxed without scripts: nothing a run printed runs here. */
class OutputView extends Widget {
  constructor(page: IRunOutput) {
    super();
    this.addClass('ak-run-output-view');
    const frame = el('iframe', { className: 'ak-run-output-frame', title: `Output of run ${page.id}` });
    frame.setAttribute('sandbox', '');
    frame.srcdoc = page.html;
    this.node.append(frame);
  }
}

// -- the failure toast ---------------------------------------------------------------------

export const WATCH_MS = 10_000;
const TOASTED_KEY = 'agent-kernel:toasted-runs';
const TOASTED_KEEP = 200;

/**
 * A toast when a run fails, once per run: it asks for the latest runs every WATCH_MS
 * while the browser tab is shown (one small request), and remembers the runs it told of
 * in localStorage, so other tabs and reloads do not tell again. Runs that had already
 * failed when it started are not news.
 */
export class FailureWatcher {
  /** `show(run)`: the toast's "Show" button (the job in the panel). */
  constructor(private show: ((run: IRun) => void) | null = null) {}

  start(): void {
    void this.check();
    this.timer = window.setInterval(() => {
      if (document.visibilityState === 'visible') {
        void this.check();
      }
    }, WATCH_MS);
  }

  stop(): void {
    if (this.timer !== null) {
      window.clearInterval(this.timer);
      this.timer = null;
    }
  }

  async check(): Promise<void> {
    let runs: IRun[];
    try {
      runs = (await api.runs(20)).runs;
    } catch {
      return; // the panel says when the server cannot be reached
    }
    const failed = runs.filter(run => FAILED.has(run.status));
    if (this.known === null) {
      this.known = new Set(failed.map(run => run.id));
      return;
    }
    const told = toasted();
    for (const run of failed) {
      if (this.known.has(run.id) || told.includes(run.id)) {
        continue;
      }
      this.known.add(run.id);
      told.push(run.id);
      toastFailure(run, this.show);
    }
    remember(told);
  }

  private known: Set<string> | null = null;
  private timer: number | null = null;
}

function toasted(): string[] {
  try {
    const kept = JSON.parse(window.localStorage.getItem(TOASTED_KEY) ?? '[]');
    return Array.isArray(kept) ? kept.filter(id => typeof id === 'string') : [];
  } catch {
    return [];
  }
}

function remember(ids: string[]): void {
  try {
    window.localStorage.setItem(TOASTED_KEY, JSON.stringify(ids.slice(-TOASTED_KEEP)));
  } catch {
    // storage full or refused: the in-memory set still keeps this tab quiet
  }
}

/** The toast's text is text: JupyterLab's notifications render the message as a string. */
function toastFailure(run: IRun, show: ((run: IRun) => void) | null): void {
  const error = run.error ? `: ${run.error.split('\n')[0].slice(0, 200)}` : '';
  const status = run.status.toLowerCase().replace('_', ' ');
  Notification.error(`Scheduled run of “${run.job_name ?? run.job_id}” ${status}${error}`, {
    autoClose: false,
    actions: show ? [{ label: 'Show', callback: () => show(run) }] : []
  });
}
