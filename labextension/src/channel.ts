/**
 * The notebook channel: a comm between a notebook's kernel (agent_kernel.kernel.channel)
 * and this extension, so the agent knows a front end that can show and apply notebook
 * edits is attached, which notebook it is and which cell is selected, and can read the
 * notebook's cells.
 *
 * Either end opens it: this extension when the kernel connects (if the kernel has not
 * loaded agent_kernel yet it closes the comm) and the kernel when agent_kernel loads. The
 * extension's first message is `hello`; it then reports the selected cell (`focus`) and
 * answers `read` requests with the cells and `edit` requests by inserting a cell. Any
 * other message from the kernel is ignored: only our own message types are acted on, and
 * none of them runs code.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

export const TARGET = 'agent_kernel.notebook';
const PROTOCOL = 1;
const MAX_SOURCE_CHARS = 200_000;
const MAX_OUTPUT_CHARS = 2_000;
const MAX_OUTPUTS = 20;
const MAX_CELLS = 2000;
const MAX_EDIT_CHARS = 20_000;
const MAX_ANSWER_CHARS = 1_900_000; // under the kernel's 2 MB limit for a cells message

/** Attach every notebook the tracker opens. */
export function attachNotebooks(notebooks: INotebookTracker): void {
  notebooks.widgetAdded.connect((_, panel) => new NotebookChannel(panel));
}

class NotebookChannel {
  private comm: Kernel.IComm | null = null;

  constructor(private readonly panel: NotebookPanel) {
    const session = panel.sessionContext;
    session.kernelChanged.connect(() => this.connect(session));
    void session.ready.then(() => this.connect(session));
    panel.content.activeCellChanged.connect((_, cell) => this.focus(cell));
    panel.disposed.connect(() => this.comm?.close());
  }

  private connect(session: ISessionContext): void {
    const kernel = session.session?.kernel;
    this.comm = null;
    if (!kernel || kernel.isDisposed) {
      return;
    }
    kernel.registerCommTarget(TARGET, comm => this.adopt(comm, false));
    this.adopt(kernel.createComm(TARGET), true);
  }

  /** Use `comm` (ours, still to open, or the kernel's announcement) and say hello on it. */
  private adopt(comm: Kernel.IComm, ours: boolean): void {
    const hello = { type: 'hello', protocol: PROTOCOL, notebook: this.panel.context.path };
    comm.onMsg = msg => this.receive(comm, msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
      }
    };
    if (ours) {
      comm.open(hello);
    } else {
      comm.send(hello);
    }
  }

  private receive(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as JSONObject;
    const type = typeof data?.type === 'string' ? data.type : '';
    if (type === 'welcome') {
      this.comm = comm;
      this.focus(this.panel.content.activeCell);
    } else if (type === 'read' && comm === this.comm && isRequestId(data.id)) {
      comm.send({ type: 'cells', id: data.id, cells: this.cells() });
    } else if (type === 'edit' && comm === this.comm && isRequestId(data.id)) {
      comm.send({ type: 'edited', id: data.id, ...this.edit(data) });
    }
  }

  /**
   * Apply an edit the kernel asks for (inserting a cell after a given one), through the
   * shared document, so collaborators see it too. Nothing is run: the source is text.
   */
  private edit(data: JSONObject): JSONObject {
    const model = this.panel.content.model;
    const { op, after, cell_type: cellType, source } = data;
    if (op !== 'insert' || (cellType !== 'code' && cellType !== 'markdown')) {
      return { error: 'only code or markdown cells can be inserted' };
    }
    if (typeof source !== 'string' || source.length > MAX_EDIT_CHARS) {
      return { error: `source is text of at most ${MAX_EDIT_CHARS} characters` };
    }
    const cells = model ? Array.from({ length: model.cells.length }, (_, i) => model.cells.get(i).id) : [];
    const index = cells.indexOf(String(after));
    if (!model || index < 0) {
      return { error: `no cell ${String(after).slice(0, 64)} in this notebook` };
    }
    const inserted = model.sharedModel.insertCell(index + 1, {
      cell_type: cellType,
      source,
      metadata: { agent_kernel: markOf(data.metadata) }
    });
    return { cell: inserted.getId() };
  }

  private focus(cell: Cell | null): void {
    this.comm?.send({ type: 'focus', cell: cell?.model.id ?? null });
  }

  /** The notebook's cells as the kernel's channel accepts them, bounded in size. */
  private cells(): JSONObject[] {
    const model = this.panel.content.model;
    const cells: JSONObject[] = [];
    let size = 0;
    for (let i = 0; model && i < model.cells.length && i < MAX_CELLS; i++) {
      const cell = model.cells.get(i);
      const shared = cell.sharedModel.toJSON() as JSONObject;
      const summary: JSONObject = {
        id: cell.id,
        cell_type: cell.type,
        source: cell.sharedModel.getSource().slice(0, MAX_SOURCE_CHARS),
        execution_count: (shared.execution_count as number | null | undefined) ?? null,
        outputs: outputsOf(shared)
      };
      size += JSON.stringify(summary).length;
      if (size > MAX_ANSWER_CHARS) {
        summary.source = '';
        summary.outputs = [];
        summary.truncated = true;
      }
      cells.push(summary);
    }
    return cells;
  }
}

/** The session and turn an agent's cell is marked with, and nothing else. */
function markOf(metadata: unknown): JSONObject {
  const mark = ((metadata as JSONObject | null)?.agent_kernel ?? {}) as JSONObject;
  return {
    session: String(mark.session ?? '').slice(0, 64),
    turn: Number.isInteger(mark.turn) ? (mark.turn as number) : 0
  };
}

function isRequestId(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 2 ** 31;
}

/** Each output as its kind, its text (truncated) and which images it holds. */
function outputsOf(cell: JSONObject): JSONObject[] {
  const outputs = Array.isArray(cell.outputs) ? (cell.outputs as JSONObject[]) : [];
  return outputs.slice(0, MAX_OUTPUTS).map(output => {
    const data = (output.data ?? {}) as JSONObject;
    const text = output.text ?? data['text/plain'] ?? output.evalue ?? '';
    return {
      output_type: String(output.output_type ?? ''),
      text: (Array.isArray(text) ? text.join('') : String(text)).slice(0, MAX_OUTPUT_CHARS),
      images: Object.keys(data).filter(mime => mime.startsWith('image/'))
    };
  });
}
