/**
 * The cell of an `%agent` turn this front end ran, once the turn is over.
 *
 * A kernel that dies or restarts mid-turn never settles the turn, so its cell would keep the
 * live status line ("waiting for the model…") and the Stop button: this front end, the one
 * that ran the cell, replaces them in the shared document with "The kernel stopped during
 * this turn." (collaborators and the saved notebook see it too).
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
      if (panel.context.model.collaborative) {
        republish(panel, cell.model.id);
      }
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

/** Write the turn cell's outputs again, whole (see the module's comment). */
function republish(panel: NotebookPanel, id: string): void {
  const cell = sharedCell(panel, id);
  const outputs = cell?.getOutputs() ?? [];
  if (cell && outputs.some(output => ((output.data ?? {}) as JSONObject)[MIME_TYPE] !== undefined)) {
    cell.setOutputs(outputs);
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
