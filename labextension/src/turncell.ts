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
 */
import type * as nbformat from '@jupyterlab/nbformat';
import { Cell } from '@jupyterlab/cells';
import { Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { ISharedCodeCell } from '@jupyter/ydoc';
import type { JSONObject } from '@lumino/coreutils';

import { MIME_TYPE } from './mime';

const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
export const KERNEL_STOPPED = 'The kernel stopped during this turn.';
const STOPPED_STATES: ReadonlySet<Kernel.Status> = new Set<Kernel.Status>(['dead', 'restarting', 'autorestarting']);

/** Follow the cells `panel` runs: what a turn leaves in them when the kernel stops or the turn ends. */
export function followTurnCells(panel: NotebookPanel): void {
  const running = new Set<string>(); // cells this front end asked the kernel to run
  const scheduled = (_: unknown, { notebook, cell }: { notebook: Notebook; cell: Cell }) => {
    if (notebook === panel.content) {
      running.add(cell.model.id);
    }
  };
  const executed = (_: unknown, { notebook, cell }: { notebook: Notebook; cell: Cell }) => {
    if (notebook === panel.content) {
      running.delete(cell.model.id);
      settle(panel, cell.model.id, panel.context.model.collaborative === true);
    }
  };
  const status = (_: ISessionContext, state: Kernel.Status) => {
    if (STOPPED_STATES.has(state)) {
      running.forEach(id => stopped(panel, id));
      running.clear(); // their executions were cancelled: no `executed` follows
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

/** The turn in cell `id` did not settle: its status line and Stop button say the kernel stopped. */
function stopped(panel: NotebookPanel, id: string): void {
  const cell = sharedCell(panel, id);
  const outputs = cell?.getOutputs() ?? [];
  const at = outputs.findIndex(isLiveStatus);
  if (!cell || at < 0) {
    return;
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
}
