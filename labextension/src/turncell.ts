/**
 * The cell of an `%agent` turn this front end ran, once the turn is over.
 *
 * A kernel that dies or restarts mid-turn never settles the turn, so its cell would keep the
 * live status line ("waiting for the model…") and the Stop button: this front end, the one
 * that ran the cell, replaces them in the shared document with "The kernel stopped during
 * this turn." (collaborators and the saved notebook see it too).
 *
 * When the turn's cell finishes, the displays the turn blanked as it settled (the status line,
 * the Stop button) are dropped, so the saved notebook holds only what the turn showed.
 *
 * Under real-time collaboration the other people's views apply the turn's display updates
 * out of order (JupyterLab appends every output another client replaced), so they would keep
 * stale tool rows and status lines. When the turn's cell finishes, the front end that ran it
 * writes the cell's outputs again, whole, in one transaction: every view then shows the
 * turn's final outputs in the sender's order.
 *
 * A person with a screen reader hears, through the page's polite live region, that a turn
 * this front end ran has started (once its first output shows) and how it ended: "Agent
 * turn finished: 2 tool calls.", "Agent turn stopped.", "Agent turn failed: …". Once per
 * turn, never per streamed paragraph; a notebook reopened with saved turns says nothing.
 * The cards a turn waits on (an approval, a form, a diff) announce themselves.
 */
import type * as nbformat from '@jupyterlab/nbformat';
import { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { KernelError, Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { ISharedCodeCell } from '@jupyter/ydoc';
import type { JSONObject } from '@lumino/coreutils';

import { announce } from './dom';
import { MIME_TYPE } from './mime';

const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
export const KERNEL_STOPPED = 'The kernel stopped during this turn.';
const STOPPED_STATES: ReadonlySet<Kernel.Status> = new Set<Kernel.Status>(['dead', 'restarting', 'autorestarting']);

/** Follow the cells `panel` runs: what a turn leaves in them when the kernel stops or the turn ends. */
export function followTurnCells(panel: NotebookPanel): void {
  const running = new Set<string>(); // cells this front end asked the kernel to run
  const starts = new Map<string, () => void>(); // turn cells not yet heard from: stop listening
  const scheduled = (_: unknown, { notebook, cell }: { notebook: Notebook; cell: Cell }) => {
    if (notebook === panel.content) {
      running.add(cell.model.id);
      starts.get(cell.model.id)?.();
      starts.delete(cell.model.id);
      if (isTurnSource(cell.model.sharedModel.getSource())) {
        starts.set(
          cell.model.id,
          announceStart(cell, () => starts.delete(cell.model.id))
        );
      }
    }
  };
  const executed = (
    _: unknown,
    { notebook, cell, error }: { notebook: Notebook; cell: Cell; error?: KernelError | null }
  ) => {
    if (notebook === panel.content) {
      running.delete(cell.model.id);
      starts.get(cell.model.id)?.();
      starts.delete(cell.model.id);
      settle(panel, cell.model.id, panel.context.model.collaborative === true);
      const ended = turnEnded(panel, cell, error);
      if (ended) {
        announce(ended);
      }
    }
  };
  const status = (_: ISessionContext, state: Kernel.Status) => {
    if (STOPPED_STATES.has(state)) {
      let cut = false;
      running.forEach(id => (cut = stopped(panel, id) || cut));
      running.clear(); // their executions were cancelled: no `executed` follows
      starts.forEach(stop => stop());
      starts.clear();
      if (cut) {
        announce(`Agent turn failed: ${KERNEL_STOPPED}`);
      }
    }
  };
  NotebookActions.executionScheduled.connect(scheduled);
  NotebookActions.executed.connect(executed);
  panel.sessionContext.statusChanged.connect(status);
  panel.disposed.connect(() => {
    NotebookActions.executionScheduled.disconnect(scheduled);
    NotebookActions.executed.disconnect(executed);
  });
}

/** The shared code cell with `id` in `panel`'s document (null: gone, or not code). */
function sharedCell(panel: NotebookPanel, id: string): ISharedCodeCell | null {
  const cells = panel.content.model?.sharedModel.cells ?? [];
  const cell = cells.find(c => c.getId() === id);
  return cell && cell.cell_type === 'code' ? (cell as ISharedCodeCell) : null;
}

/** Whether `output` is a turn's live status line (it is blanked when the turn settles). */
function isLiveStatus(output: nbformat.IOutput): boolean {
  const data = (output.data ?? {}) as JSONObject;
  const part = data[MIME_TYPE] as JSONObject | undefined;
  return part?.part === 'notice' && part.level === 'muted' && data['text/plain'] === undefined;
}

/** Whether `output` is a display the turn blanked when it settled (its status line, its
 * Stop button): nothing to show, so nothing to keep in the saved notebook. */
export function isBlanked(output: nbformat.IOutput): boolean {
  if (output.output_type !== 'display_data' && output.output_type !== 'update_display_data') {
    return false;
  }
  const data = (output.data ?? {}) as JSONObject;
  const keys = Object.keys(data);
  return keys.length === 0 || (keys.length === 1 && data['text/plain'] === '');
}

/** A turn's cell once it ran: the blanked displays dropped, and under collaboration its
 * outputs written again, whole (see the module's comment). Cells without a turn are left alone. */
function settle(panel: NotebookPanel, id: string, collaborative: boolean): void {
  const cell = sharedCell(panel, id);
  const outputs = cell?.getOutputs() ?? [];
  if (!cell || !outputs.some(output => ((output.data ?? {}) as JSONObject)[MIME_TYPE] !== undefined)) {
    return;
  }
  const kept = outputs.filter(output => !isBlanked(output));
  if (collaborative || kept.length !== outputs.length) {
    cell.setOutputs(kept);
  }
}

/** The turn in cell `id` did not settle: its status line and Stop button say the kernel
 * stopped. Whether it had one (a turn was cut). */
function stopped(panel: NotebookPanel, id: string): boolean {
  const cell = sharedCell(panel, id);
  const outputs = cell?.getOutputs() ?? [];
  const at = outputs.findIndex(isLiveStatus);
  if (!cell || at < 0) {
    return false;
  }
  const stop = outputs[at + 1]?.data as JSONObject | undefined;
  const end = stop?.[WIDGET_MIME] !== undefined ? at + 2 : at + 1;
  const notice: nbformat.IDisplayData = {
    output_type: 'display_data',
    data: {
      'text/html': `<div class="agent-kernel-error" style="color:#cf222e;font-size:0.92em">${KERNEL_STOPPED}</div>`,
      'text/plain': KERNEL_STOPPED,
      [MIME_TYPE]: { version: 1, part: 'notice', level: 'error', text: KERNEL_STOPPED }
    },
    metadata: {}
  };
  cell.setOutputs([...outputs.slice(0, at), notice, ...outputs.slice(end)]);
  return true;
}

/** Whether a cell's source runs an agent turn (`%agent …` on a line, or a `%%agent` cell). */
export function isTurnSource(source: string): boolean {
  return /^[ \t]*%%?agent(?:[ \t]|$)/m.test(source);
}

/** The turn part an output carries, if any. */
function turnPart(output: nbformat.IOutput): JSONObject | undefined {
  return ((output.data ?? {}) as JSONObject)[MIME_TYPE] as JSONObject | undefined;
}

/**
 * Say "Agent turn started" once the turn in `cell` shows its first output (its status line,
 * "waiting for the model…"), then stop listening; the returned function stops listening
 * earlier (the cell finished or was run again first) and `done` runs either way.
 */
function announceStart(cell: Cell, done: () => void): () => void {
  const outputs = (cell.model as ICodeCellModel).outputs;
  if (!outputs) {
    return () => undefined;
  }
  const stop = () => {
    outputs.changed.disconnect(changed);
    done();
  };
  const changed = () => {
    const shown = outputs.toJSON();
    if (!shown.some(output => turnPart(output) !== undefined)) {
      return;
    }
    stop();
    const status = shown.find(isLiveStatus);
    const text = status ? turnPart(status)?.text : undefined;
    const waiting = typeof text === 'string' ? text.replace(/…$/, '').trim() : '';
    announce(waiting ? `Agent turn started: ${waiting}.` : 'Agent turn started.');
  };
  outputs.changed.connect(changed);
  return stop;
}

/**
 * The sentence that says how the turn in `cell` ended (null: the cell ran no turn): the
 * `%agent` cell fails with the turn's one line (TurnFailedError) when it did not end
 * normally, or before it began (a usage error, no key).
 */
function turnEnded(panel: NotebookPanel, cell: Cell, error?: KernelError | null): string | null {
  const outputs = sharedCell(panel, cell.model.id)?.getOutputs() ?? [];
  const parts = outputs.map(turnPart).filter((part): part is JSONObject => part !== undefined);
  if (error) {
    if (!parts.length && !isTurnSource(cell.model.sharedModel.getSource())) {
      return null;
    }
    const line = error.errorValue.trim();
    if (error.errorName === 'TurnFailedError' && /^■ Stopped/.test(line)) {
      return 'Agent turn stopped.';
    }
    if (error.errorName === 'TurnFailedError' && /^■ Interrupted/.test(line)) {
      return 'Agent turn interrupted.';
    }
    return `Agent turn failed: ${line || error.errorName}`;
  }
  if (!parts.length) {
    return null;
  }
  const calls = parts.filter(part => part.part === 'tool').length;
  return `Agent turn finished: ${calls} tool call${calls === 1 ? '' : 's'}.`;
}
