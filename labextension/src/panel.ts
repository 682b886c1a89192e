/**
 * The Agent dashboard (left sidebar): sessions, items kept after untrusted content,
 * scheduled jobs with the jobs manager, recent runs, stats. The chat has a sidebar of its
 * own (chatpanel.ts), so the lists here keep the width they need.
 *
 * It refreshes every POLL_MS while it is visible and the browser tab is shown, and
 * at once after an action; hidden, it asks nothing of the server.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { Panel, Widget } from '@lumino/widgets';

import { api, IJob, IRun, ISession, IStats, ISchedulerStatus, ITainted } from './api';
import { actionButton, duration, el, local, money, relative } from './dom';
import { JobsManager, openRunOutput } from './jobs';
import { readableName } from './names';
import { onSessionsChanged } from './follow';

export const POLL_MS = 10_000;

/** The sidebar's id: FailureWatcher's "Show" and the show-dashboard command bring it forward. */
export const DASHBOARD_ID = 'agent-kernel-dashboard';

/** Sessions, kept-after-untrusted items, jobs, runs and stats, refreshed while shown. */
export class AgentDashboard extends Panel {
  constructor(
    private app: JupyterFrontEnd,
    private notebooks: INotebookTracker | null
  ) {
    super();
    this.id = DASHBOARD_ID;
    this.addClass('ak-panel');
    this.addClass('ak-dashboard-panel');
    this.title.caption = 'Agent dashboard: sessions, jobs, runs, stats';
    const dashboard = new Widget();
    dashboard.addClass('ak-dashboard');
    this.addWidget(dashboard);
    dashboard.node.append(
      el(
        'header',
        { className: 'ak-panel-head' },
        el('h2', {}, 'Agent dashboard'),
        el(
          'button',
          {
            className: 'ak-button',
            title: 'Refresh',
            'aria-label': 'Refresh the dashboard',
            onclick: () => void this.refresh()
          },
          '⟳'
        )
      ),
      this.errorNode,
      this.sessionsNode,
      this.taintedNode,
      this.jobsNode,
      this.jobsManager.node,
      this.runsNode,
      this.statsNode
    );
    document.addEventListener('visibilitychange', this.onVisibility);
    this.jobsManager.follow(this.jobsNode);
    notebooks?.currentChanged.connect(() => {
      if (this.isVisible) {
        void this.refresh();
      }
    });
    // The current notebook renamed (its sessions under the new path) or a turn of it ended.
    onSessionsChanged(panel => {
      if (this.isVisible && panel === notebooks?.currentWidget) {
        void this.refresh();
      }
    });
  }

  dispose(): void {
    document.removeEventListener('visibilitychange', this.onVisibility);
    this.stopPolling();
    super.dispose();
  }

  /** Fetch everything once and redraw. */
  async refresh(): Promise<void> {
    const notebook = this.notebooks?.currentWidget?.context.path;
    try {
      const [sessions, tainted, jobs, runs, stats] = await Promise.all([
        api.sessions(this.allSessions ? undefined : notebook),
        api.tainted(),
        api.jobs(),
        api.runs(),
        api.stats()
      ]);
      this.errorNode.textContent = '';
      this.drawSessions(sessions.sessions, notebook);
      this.drawTainted(tainted.items, tainted.total);
      this.drawJobs(jobs.jobs, jobs.scheduler);
      void this.jobsManager.update(jobs.jobs);
      this.drawRuns(runs.runs);
      this.drawStats(stats);
    } catch (error) {
      this.errorNode.textContent = `Cannot reach the agent-kernel server extension: ${(error as Error).message}`;
    }
  }

  protected onAfterShow(): void {
    void this.refresh();
    this.startPolling();
  }

  protected onAfterHide(): void {
    this.stopPolling();
  }

  private startPolling(): void {
    this.stopPolling();
    this.timer = window.setInterval(() => {
      if (this.isVisible && document.visibilityState === 'visible') {
        void this.refresh();
      }
    }, POLL_MS);
  }

  private stopPolling(): void {
    if (this.timer !== null) {
      window.clearInterval(this.timer);
      this.timer = null;
    }
  }

  private onVisibility = (): void => {
    if (this.isVisible && document.visibilityState === 'visible') {
      void this.refresh();
    }
  };

  // -- sessions ----------------------------------------------------------------------------

  private drawSessions(sessions: ISession[], notebook: string | undefined): void {
    const toggle = el(
      'select',
      {
        className: 'ak-select',
        title: 'Which sessions to show',
        onchange: (event: Event) => {
          this.allSessions = (event.target as HTMLSelectElement).value === 'all';
          void this.refresh();
        }
      },
      el('option', { value: 'notebook', selected: !this.allSessions }, 'This notebook'),
      el('option', { value: 'all', selected: this.allSessions }, 'All notebooks')
    );
    const byParent = new Map<string | null, ISession[]>();
    const ids = new Set(sessions.map(s => s.id));
    for (const session of sessions) {
      const parent = session.parent_id && ids.has(session.parent_id) ? session.parent_id : null;
      byParent.set(parent, [...(byParent.get(parent) ?? []), session]);
    }
    const list = el('ul', { className: 'ak-tree' });
    const add = (parent: string | null, into: HTMLElement) => {
      for (const session of byParent.get(parent) ?? []) {
        const children = el('ul', { className: 'ak-tree' });
        add(session.id, children);
        into.append(
          el(
            'li',
            { className: 'ak-session', 'data-session': session.name },
            el(
              'div',
              { className: 'ak-row' },
              el(
                'span',
                { className: `ak-state ak-state-${session.state}`, title: session.last_error ?? session.state },
                session.state
              ),
              el(
                'strong',
                { title: `${session.name}${session.notebook ? ` · ${session.notebook}` : ''}` },
                readableName(session.name, session.created_at)
              ),
              el('span', { className: 'ak-muted' }, relative(session.updated_at))
            ),
            el(
              'div',
              {
                className: 'ak-row ak-muted',
                title:
                  "Tokens as the session's token limit counts them (a token read from the prompt cache counts a tenth), and its cost"
              },
              `${session.tokens.toLocaleString()} tokens toward its limit · ${money(session.cost)}` +
                (this.allSessions && session.notebook_path ? ` · ${session.notebook_path}` : '')
            ),
            children.childElementCount ? children : null
          )
        );
      }
    };
    add(null, list);
    const empty = sessions.length
      ? null
      : el(
          'p',
          { className: 'ak-muted' },
          notebook && !this.allSessions
            ? 'No agent session in this notebook yet: run an %agent cell.'
            : 'No agent sessions yet.'
        );
    this.sessionsNode.replaceChildren(el('h3', {}, 'Sessions ', toggle), list, empty ?? '');
  }

  // -- kept after untrusted content -------------------------------------------------------

  /** What the agent kept after reading untrusted content: later turns see it as data and
   * its code asks before it runs, until the person reviews it and clears it here. */
  private drawTainted(items: ITainted[], total: number): void {
    const rows = items.map(item => {
      const from = item.session ?? (item.session_id ? item.session_id.slice(0, 8) : 'unknown session');
      const sources = item.sources.length
        ? `after ${item.sources.slice(0, 2).join(', ')}${item.sources.length > 2 ? ` and ${item.sources.length - 2} more` : ''}`
        : '';
      return el(
        'li',
        { className: 'ak-tainted', 'data-kind': item.kind, 'data-name': item.name },
        el(
          'div',
          { className: 'ak-row' },
          el('span', { className: 'ak-status ak-status-tainted' }, item.kind),
          el('strong', { title: item.name }, item.name),
          el('span', { className: 'ak-muted', title: local(item.created_at) }, relative(item.created_at))
        ),
        el(
          'div',
          { className: 'ak-row ak-muted', title: item.sources.join('\n') },
          `${from}${item.turn !== null ? `, turn ${item.turn}` : ''}${sources ? ` · ${sources}` : ''}`
        ),
        el(
          'div',
          { className: 'ak-actions' },
          this.button('Clear', () => api.clearTainted(item.kind, item.name))
        )
      );
    });
    const more = total > items.length ? el('p', { className: 'ak-muted' }, `and ${total - items.length} more`) : '';
    this.taintedNode.replaceChildren(
      el(
        'h3',
        {
          title:
            'Written by a turn that had read web pages, fetched files or MCP results: later turns see it as data, and its code asks before it runs. Clear an item once you have reviewed it.'
        },
        'Kept after untrusted content'
      ),
      rows.length
        ? el('ul', { className: 'ak-list' }, ...rows)
        : el('p', { className: 'ak-muted' }, 'Nothing: everything kept was written before any untrusted content.'),
      more
    );
  }

  // -- jobs --------------------------------------------------------------------------------

  private drawJobs(jobs: IJob[], scheduler: ISchedulerStatus): void {
    const rows = jobs.map(job =>
      el(
        'li',
        { className: 'ak-job', 'data-job': job.name },
        el(
          'div',
          { className: 'ak-row' },
          el('strong', { title: job.notebook ?? job.task ?? '' }, job.name),
          el(
            'span',
            { className: `ak-status ak-status-${(job.last_status ?? 'none').toLowerCase()}` },
            job.last_status ?? 'not run yet'
          )
        ),
        el(
          'div',
          { className: 'ak-row ak-muted' },
          `${job.schedule} · ` + (job.enabled ? `next ${relative(job.next_run)}` : 'disabled')
        ),
        el(
          'div',
          { className: 'ak-actions' },
          this.button(job.enabled ? 'Disable' : 'Enable', () => api.setEnabled(job.id, !job.enabled)),
          this.button('Run now', () => api.runNow(job.id)),
          this.button('Delete', async () => {
            const answer = await showDialog({
              title: 'Delete job',
              body: `Delete the job “${job.name}”? Its runs stay in the history.`,
              buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Delete' })]
            });
            if (answer.button.accept) {
              await api.deleteJob(job.id);
            }
          })
        )
      )
    );
    const banner = scheduler.running
      ? null
      : el('p', { className: 'ak-warning' }, scheduler.message ?? 'No scheduler is running.');
    this.jobsNode.replaceChildren(
      el('h3', {}, 'Scheduled jobs'),
      banner ?? '',
      rows.length
        ? el('ul', { className: 'ak-list' }, ...rows)
        : el('p', { className: 'ak-muted' }, 'No jobs: use “Schedule this notebook…” or ask the agent.')
    );
  }

  // -- runs --------------------------------------------------------------------------------

  private drawRuns(runs: IRun[]): void {
    const rows = runs.map(run =>
      el(
        'li',
        { className: 'ak-run', 'data-run': run.id },
        el(
          'div',
          { className: 'ak-row' },
          el(
            'span',
            { className: `ak-status ak-status-${run.status.toLowerCase()}`, title: run.error ?? '' },
            run.status
          ),
          el('strong', {}, run.job_name ?? run.job_id),
          el(
            'span',
            { className: 'ak-muted', title: local(run.started_at ?? run.scheduled_for) },
            `${relative(run.started_at ?? run.scheduled_for)} ${duration(run.seconds)}`
          )
        ),
        run.error ? el('div', { className: 'ak-row ak-error', title: run.error }, run.error.split('\n')[0]) : null,
        run.output_path && !['QUEUED', 'SKIPPED'].includes(run.status)
          ? el(
              'div',
              { className: 'ak-actions' },
              this.button('Open output', () => openRunOutput(this.app, run))
            )
          : null
      )
    );
    this.runsNode.replaceChildren(
      el('h3', {}, 'Recent runs'),
      rows.length ? el('ul', { className: 'ak-list' }, ...rows) : el('p', { className: 'ak-muted' }, 'No runs yet.')
    );
  }

  // -- stats -------------------------------------------------------------------------------

  private drawStats(stats: IStats): void {
    const count = (n: number) => n.toLocaleString();
    const plural = (n: number, word: string) => `${count(n)} ${word}${n === 1 ? '' : 's'}`;
    const figure = (label: string, value: string, title?: string) =>
      el('tr', { title }, el('th', { scope: 'row' }, label), el('td', {}, value));
    const categories = Object.entries(stats.failures_by_category);
    const days = stats.per_day.slice(-7);
    this.statsNode.replaceChildren(
      el('h3', {}, `Last ${stats.days} days`),
      el(
        'table',
        { className: 'ak-figures' },
        figure('Code runs', count(stats.code_runs) + (stats.failed ? ` (${count(stats.failed)} failed)` : '')),
        categories.length
          ? figure(
              'Failures by kind',
              categories.map(([name, n]) => `${plural(n, `${name} error`)}`).join(', '),
              'What the failed code runs ended with: syntax, import, type, reference, timeout, network or runtime errors'
            )
          : null,
        figure(
          'Tool calls',
          count(stats.tool_calls) + (stats.tool_errors ? ` (${count(stats.tool_errors)} failed)` : '')
        ),
        figure(
          'Tokens',
          count(stats.tokens),
          "As the sessions' token limits count them: a token read from the prompt cache counts a tenth"
        ),
        figure(
          'Store',
          stats.store.text,
          'The DuckDB file that keeps sessions, runs and memories. Old tool results and run outputs are ' +
            'pruned after AgentKernel.retention_full_days; agent-kernel store stats|prune|vacuum'
        )
      ),
      days.length
        ? el(
            'table',
            { className: 'ak-days' },
            el('tr', {}, el('th', {}, 'Day'), el('th', {}, 'Code runs'), el('th', {}, 'Failed'), el('th', {}, 'Cost')),
            ...days.map(d =>
              el(
                'tr',
                {},
                el('td', {}, d.day),
                el('td', {}, count(d.code_runs)),
                el('td', {}, count(d.failures)),
                el('td', {}, money(d.cost))
              )
            )
          )
        : ''
    );
  }

  private button(label: string, action: () => Promise<unknown>): HTMLButtonElement {
    return actionButton(label, action, () => this.refresh());
  }

  readonly jobsManager = new JobsManager(this.app, () => void this.refresh());
  private allSessions = false;
  private timer: number | null = null;
  private errorNode = el('p', { className: 'ak-error' });
  private sessionsNode = el('section', { className: 'ak-section ak-sessions' });
  private taintedNode = el('section', { className: 'ak-section ak-tainted-items' });
  private jobsNode = el('section', { className: 'ak-section ak-jobs' });
  private runsNode = el('section', { className: 'ak-section ak-runs' });
  private statsNode = el('section', { className: 'ak-section ak-stats' });
}
