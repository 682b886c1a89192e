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

import { api, INewJob } from './api';
import { el } from './dom';

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
  const cell = cells.find(
    c => c.cell_type === 'code' && (c.metadata?.tags ?? []).includes('parameters')
  );
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
    return JSON.parse(trimmed.replace(/\bTrue\b/g, 'true').replace(/\bFalse\b/g, 'false').replace(/\bNone\b/g, 'null'));
  } catch {
    return trimmed;
  }
}

function timezones(): string[] {
  const intl = Intl as any;
  return typeof intl.supportedValuesOf === 'function' ? intl.supportedValuesOf('timeZone') : ['UTC'];
}

class ScheduleForm extends Widget {
  constructor(path: string, parameters: IParameter[]) {
    super();
    this.addClass('ak-schedule-form');
    this.path = path;
    const stem = path.split('/').pop()!.replace(/\.ipynb$/, '');
    this.name = el('input', { className: 'jp-mod-styled', value: stem, name: 'name' });
    this.cron = el('input', { className: 'jp-mod-styled', value: PRESETS[1][1], name: 'cron' });
    this.at = el('input', { className: 'jp-mod-styled', type: 'datetime-local', name: 'at' });
    const soon = new Date(Date.now() + 3600_000);
    soon.setSeconds(0, 0);
    this.at.value = new Date(soon.getTime() - soon.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    this.timezone = el('input', {
      className: 'jp-mod-styled', name: 'timezone', list: 'ak-timezones',
      value: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
    });
    this.overlap = el('select', { className: 'jp-mod-styled', name: 'overlap' },
      el('option', { value: 'forbid' }, 'Skip a run while the previous one is still going'),
      el('option', { value: 'queue' }, 'Queue it until the previous one ends'),
      el('option', { value: 'allow' }, 'Run at once, alongside the previous one')
    );
    const preset = el('select', {
      className: 'jp-mod-styled', name: 'preset',
      onchange: (event: Event) => {
        const value = (event.target as HTMLSelectElement).value;
        if (value) {
          this.cron.value = value;
        }
      }
    }, ...PRESETS.map(([label, cron]) => el('option', { value: cron, selected: cron === PRESETS[1][1] }, label)),
      el('option', { value: '' }, 'Custom (edit the cron expression)'));
    this.once = el('input', { type: 'radio', name: 'when', value: 'once' });
    this.recurring = el('input', { type: 'radio', name: 'when', value: 'cron', checked: true });
    const sync = () => {
      cronRow.hidden = !this.recurring.checked;
      atRow.hidden = !this.once.checked;
    };
    this.once.addEventListener('change', sync);
    this.recurring.addEventListener('change', sync);
    const cronRow = el('div', { className: 'ak-field' }, el('label', {}, 'Repeat'), preset, this.cron);
    const atRow = el('div', { className: 'ak-field' }, el('label', {}, 'At'), this.at);
    this.parameterRows = parameters.map(p => {
      const input = el('input', { className: 'jp-mod-styled', value: p.value, name: `parameter-${p.name}` });
      return { name: p.name, input };
    });
    this.node.append(
      el('p', { className: 'ak-muted' }, `Runs ${path} with papermill, in its own kernel.`),
      el('div', { className: 'ak-field' }, el('label', {}, 'Name'), this.name),
      el('div', { className: 'ak-field ak-when' },
        el('label', {}, this.recurring, ' On a schedule'),
        el('label', {}, this.once, ' Once')),
      cronRow,
      atRow,
      el('div', { className: 'ak-field' }, el('label', {}, 'Timezone'), this.timezone,
        el('datalist', { id: 'ak-timezones' }, ...timezones().map(tz => el('option', { value: tz })))),
      el('div', { className: 'ak-field' }, el('label', {}, 'Overlap'), this.overlap),
      el('h4', {}, 'Parameters'),
      this.parameterRows.length
        ? el('div', { className: 'ak-parameters' },
            ...this.parameterRows.map(row => el('div', { className: 'ak-field' }, el('label', {}, row.name), row.input)))
        : el('p', { className: 'ak-muted' }, 'No cell tagged “parameters” in this notebook: it runs as it is.')
    );
    sync();
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
    return job;
  }

  /** Fill the form with what was sent before (after the server refused it). */
  restore(job: INewJob): void {
    this.name.value = job.name ?? this.name.value;
    this.timezone.value = job.timezone ?? this.timezone.value;
    this.overlap.value = job.overlap ?? this.overlap.value;
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
    await showErrorMessage('Schedule this notebook',
      'This notebook has no kernel: open it, choose a kernel and save it, then schedule it.');
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
      form = new ScheduleForm(path, Object.entries(kept.parameters ?? {}).map(([name, value]) => ({
        name, value: typeof value === 'string' ? `'${value}'` : JSON.stringify(value)
      })));
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
