/**
 * The notebook channel: a comm between a notebook's kernel (agent_kernel.kernel.channel)
 * and this extension, so the agent knows a front end that can show and apply notebook
 * edits is attached, which notebook it is and which cell is selected, and can read the
 * notebook's cells.
 *
 * This extension opens it when the kernel connects (if the kernel has not loaded
 * agent_kernel yet it closes the comm) and again when the kernel announces that it loaded
 * agent_kernel: every front end on the kernel gets its own comm. The
 * extension's first message is `hello` (with the server's root); it then reports the notebook's
 * new path when it is renamed, moved or saved as a copy (`moved`, see follow.ts), hears when a
 * turn ended (`turn_ended`: the chat reloads), reports the selected cell (`focus`) and
 * answers `read` requests with the cells and `edit` requests by inserting, replacing,
 * deleting or moving a cell (in `ask` mode only after the person accepts its diff). Any
 * other message from the kernel is ignored: only our own message types (protocol.ts), each
 * checked, are acted on. The one thing that runs code: a cell this extension itself inserted
 * or replaced with `run` (auto mode, or accepted in ask mode) runs through JupyterLab's own
 * execution once the `%agent` cell has finished (the kernel is busy with the turn until then).
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ISessionContext } from '@jupyterlab/apputils';
import { Cell, CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

import { checkedMark, otherPeople, reportedMark, untrustedSources } from './cellmark';
import { askAbout, IProposal } from './diff';
import { followTurnCells } from './turncell';
import { nameOnSave, notebookDocument, serverRoot, sessionsChanged } from './follow';
import {
  CELL_CHANGED,
  CellType,
  FrontEndMessage,
  ICellOutput,
  ICellsMessage,
  IEditedMessage,
  IEditRequest,
  IHelloMessage,
  IMovedMessage,
  INotebookCell,
  kernelMessage,
  PROTOCOL,
  sourceVersion
} from './protocol';

export const TARGET = 'agent_kernel.notebook';
const MAX_SOURCE_CHARS = 200_000;
const MAX_OUTPUT_CHARS = 2_000;
const MAX_OUTPUTS = 20;
const MAX_CELLS = 2000;
const MAX_EDIT_CHARS = 20_000;
const MAX_MESSAGE_CHARS = 64 * 1024; // what the kernel sends at most (an edit, a read request)
const MAX_ANSWER_CHARS = 1_900_000; // under the kernel's 2 MB limit for a cells message

const CELL_ID = /^[A-Za-z0-9_-]{1,64}$/;
const SOURCE_VERSION = /^[0-9a-f]{1,14}:[0-9]{1,7}$/; // sourceVersion(): hash and length
export const UNDO_TURN = 'agent-kernel:undo-turn-edits';
const CHANNELS = new WeakMap<NotebookPanel, NotebookChannel>();

/** Attach every notebook the tracker opens; "Undo the agent's edits of this turn". */
export function attachNotebooks(notebooks: INotebookTracker, app?: JupyterFrontEnd): void {
  notebooks.widgetAdded.connect((_, panel) => CHANNELS.set(panel, new NotebookChannel(panel)));
  app?.commands.addCommand(UNDO_TURN, {
    label: "Undo the agent's edits of this turn",
    caption: 'Revert every cell the last agent turn inserted, replaced, deleted or moved',
    isEnabled: () => {
      const panel = notebooks.currentWidget;
      return !!panel && !!CHANNELS.get(panel)?.canUndo();
    },
    execute: () => {
      const panel = notebooks.currentWidget;
      return panel ? CHANNELS.get(panel)?.undoTurn() : undefined;
    }
  });
  app?.contextMenu.addItem({ command: UNDO_TURN, selector: '.jp-Notebook', rank: 0 });
}

/**
 * A turn from the Agent panel's chat ended: run the cells its edits queued (a panel turn has
 * no cell of its own to wait for).
 */
export function panelTurnEnded(panel: NotebookPanel): void {
  CHANNELS.get(panel)?.runQueued('');
}

/** How to revert one applied edit. */
type Undo = (model: NonNullable<NotebookPanel['content']['model']>) => void;

class NotebookChannel {
  private comm: Kernel.IComm | null = null;
  private turns = new Map<string, Undo[]>(); // each turn's applied edits, reverts in order
  private queued: { cell: string; after: string }[] = []; // cells to run after the turn cell
  private asking = new Map<number, () => void>(); // open diffs by request id: withdraw them

  constructor(private readonly panel: NotebookPanel) {
    NotebookActions.executed.connect((_, { notebook, cell }) => {
      if (notebook === this.panel.content) {
        this.ranCell(cell.model.id);
      }
    });
    const session = panel.sessionContext;
    session.kernelChanged.connect(() => this.connect(session));
    void session.ready.then(() => this.connect(session));
    panel.content.activeCellChanged.connect((_, cell) => this.focus(cell));
    panel.disposed.connect(() => this.comm?.close());
    followTurnCells(panel);
    let path = panel.context.path;
    panel.context.pathChanged.connect((_, now) => {
      const old = path;
      path = now;
      this.moved(old, now);
    });
    nameOnSave(panel, document => {
      if (this.comm && path.endsWith('.ipynb')) {
        const named: IMovedMessage = { type: 'moved', notebook: path, old: path, document };
        send(this.comm, named);
      }
    });
  }

  /** The notebook was renamed, moved or saved as a copy: the kernel files its turns there. */
  private moved(old: string, now: string): void {
    if (old === now) {
      return;
    }
    if (this.comm && now.endsWith('.ipynb') && old.endsWith('.ipynb')) {
      const moved: IMovedMessage = { type: 'moved', notebook: now, old };
      const document = notebookDocument(this.panel);
      if (document) {
        moved.document = document;
      }
      send(this.comm, moved);
    }
    sessionsChanged(this.panel, 'moved');
  }

  private connect(session: ISessionContext): void {
    const kernel = session.session?.kernel;
    this.comm = null;
    if (!kernel || kernel.isDisposed) {
      return;
    }
    // The kernel's announcement reaches every front end on the kernel (collaborators, a
    // second view): each answers on a comm of its own, since the kernel's messages on a
    // shared comm would reach them all and each would apply every edit.
    kernel.registerCommTarget(TARGET, announced => {
      announced.close();
      this.open(kernel.createComm(TARGET));
    });
    this.open(kernel.createComm(TARGET));
  }

  /** Open `comm`, a new one of ours, with our hello. */
  private open(comm: Kernel.IComm): void {
    comm.onMsg = msg => this.receive(comm, msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
      }
    };
    const hello: IHelloMessage = { type: 'hello', protocol: PROTOCOL, notebook: this.panel.context.path };
    const root = serverRoot();
    if (root) {
      hello.root = root;
    }
    const document = notebookDocument(this.panel);
    if (document) {
      hello.document = document;
    }
    comm.open(json(hello));
  }

  private receive(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data;
    if (JSON.stringify(data ?? null).length > MAX_MESSAGE_CHARS) {
      return; // an edit is at most MAX_EDIT_CHARS of source: nothing of ours is this large
    }
    const message = kernelMessage(data);
    if (!message) {
      return;
    }
    switch (message.type) {
      case 'welcome':
        this.comm = comm;
        this.focus(this.panel.content.activeCell);
        break;
      case 'read': {
        const id = message.id;
        if (comm === this.comm && isRequestId(id)) {
          send(comm, { type: 'cells', id, ...this.answer() });
        }
        break;
      }
      case 'edit': {
        const id = message.id;
        if (comm === this.comm && isRequestId(id)) {
          void this.edit(message).then(answer => send(comm, { type: 'edited', id, ...answer }));
        }
        break;
      }
      case 'withdraw': {
        const id = message.id;
        if (comm === this.comm && isRequestId(id)) {
          this.asking.get(id)?.();
        }
        break;
      }
      case 'turn_ended':
        if (comm === this.comm) {
          sessionsChanged(this.panel, 'turn_ended'); // the chat shows turns run from cells too
        }
        break;
      case 'kernel': // the announcement's data: answered on a comm of our own (connect)
      case 'refused': // the kernel counts it; nothing here depends on it
        break;
      default:
        unexpected(message);
    }
  }

  /**
   * Apply an edit the kernel asks for, through the shared document (so collaborators see
   * it too); in ask mode only once the person accepts its diff. The source is text: only
   * an inserted cell with `run` is ever run, after the turn.
   *
   * Nothing the person types is overwritten unseen: a replace or delete made against a
   * source the cell no longer holds (`base`) is refused with CELL_CHANGED (the kernel gives
   * the model the cell as it reads now), and a diff's Accept applies only to the text its
   * card showed (diff.ts asks again when the cell changed while it waited).
   */
  private async edit(data: IEditRequest): Promise<EditOutcome> {
    const model = this.panel.content.model;
    const problem = checkEdit(data);
    if (problem || !model) {
      return { error: problem || 'the notebook is not loaded' };
    }
    const ids = Array.from({ length: model.cells.length }, (_, i) => model.cells.get(i).id);
    for (const id of [data.cell, data.after]) {
      if (id !== undefined && !ids.includes(id)) {
        return { error: `no cell ${id} in this notebook` };
      }
    }
    if (data.base !== undefined && (data.op === 'replace' || data.op === 'delete')) {
      if (sourceVersion(this.source(data.cell!)) !== data.base) {
        return { error: CELL_CHANGED };
      }
    }
    if (data.ask === true) {
      const proposal = this.proposal(data, ids);
      const host = this.panel.content.widgets[ids.indexOf((data.cell ?? data.after)!)].node;
      const { answer, withdraw } = askAbout(host, proposal);
      const id = data.id;
      const gone = new Promise<null>(resolve =>
        this.asking.set(id, () => {
          withdraw();
          resolve(null);
        })
      );
      const accepted = await Promise.race([answer, gone]);
      this.asking.delete(id);
      if (accepted === null) {
        return { error: 'withdrawn' };
      }
      if (!accepted) {
        return { error: 'the person rejected the edit', rejected: true };
      }
      if (data.cell !== undefined && this.index(data.cell) === null) {
        return { error: 'the cell went away while the diff was shown' };
      }
    }
    return this.apply(data);
  }

  /** What the diff shows for `data`. */
  private proposal(data: IEditRequest, ids: string[]): IProposal {
    const number = (id: string | undefined) => ids.indexOf(id!) + 1;
    const current = data.cell !== undefined ? this.source(data.cell) : '';
    const proposed = data.op === 'delete' ? '' : data.op === 'move' ? current : data.source!;
    const titles: Record<string, string> = {
      insert: `The agent proposes a new ${data.cell_type!} cell below cell ${number(data.after)}`,
      replace: `The agent proposes to change cell ${number(data.cell)}`,
      delete: `The agent proposes to delete cell ${number(data.cell)}`,
      move: `The agent proposes to move cell ${number(data.cell)} below cell ${number(data.after)}`
    };
    const note = data.run === true ? 'Accept also runs it once the %agent cell has finished.' : undefined;
    const cell = data.cell;
    const guarded = cell !== undefined && (data.op === 'replace' || data.op === 'delete');
    const currentNow = guarded ? () => this.source(cell) : undefined;
    return { title: titles[data.op], current, proposed, note, currentNow };
  }

  /** Where the cell with `id` is in the shared document now (null: not there). */
  private index(id: string): number | null {
    const cells = this.panel.content.model?.sharedModel.cells ?? [];
    const i = cells.findIndex(cell => cell.getId() === id);
    return i < 0 ? null : i;
  }

  private source(id: string): string {
    const i = this.index(id);
    return i === null ? '' : this.panel.content.model!.sharedModel.getCell(i).getSource();
  }

  /** Apply a checked edit to the shared document. */
  private apply(data: IEditRequest): EditOutcome {
    const model = this.panel.content.model!;
    const shared = model.sharedModel;
    const mark = markOf(data.metadata);
    const undos = this.turnUndos(mark);
    const cell = data.cell;
    const at = (id: string) => this.index(id);
    let changed = cell ?? '';
    if (data.op === 'insert') {
      const index = at(data.after!);
      if (index === null) {
        return { error: 'the cell to insert after went away' };
      }
      const inserted = shared.insertCell(index + 1, {
        cell_type: data.cell_type!,
        source: data.source!,
        metadata: { agent_kernel: mark }
      });
      changed = inserted.getId();
      undos.push(() => this.deleteById(changed));
      if (data.run === true) {
        this.queued.push({ cell: changed, after: data.turn_cell ?? '' });
      }
      return { cell: changed };
    }
    const index = at(changed);
    if (index === null) {
      return { error: `no cell ${changed} in this notebook` };
    }
    const target = shared.getCell(index);
    if (data.op === 'replace') {
      if (data.run === true && target.cell_type !== 'code') {
        return { error: 'only a code cell can run' };
      }
      const old = target.getSource();
      target.setMetadata('agent_kernel', mergedMark(target.getMetadata('agent_kernel'), mark));
      target.setSource(data.source!); // the cell's own transaction: its editor's undo reverts it
      undos.push(() => {
        const i = at(changed);
        if (i !== null) {
          shared.getCell(i).setSource(old);
        }
      });
      if (data.run === true) {
        this.queued.push({ cell: changed, after: data.turn_cell ?? '' });
      }
    } else if (data.op === 'delete') {
      const json = target.toJSON();
      shared.deleteCell(index);
      undos.push(() => shared.insertCell(Math.min(index, shared.cells.length), json));
    } else {
      const after = at(data.after!)!;
      const to = after < index ? after + 1 : after;
      shared.transact(() => {
        shared.moveCell(index, to);
        target.setMetadata('agent_kernel', mergedMark(target.getMetadata('agent_kernel'), mark));
      });
      undos.push(() => {
        const now = at(changed);
        if (now !== null) {
          shared.moveCell(now, Math.min(index, shared.cells.length - 1));
        }
      });
    }
    return { cell: changed };
  }

  private deleteById(id: string): void {
    const i = this.index(id);
    if (i !== null) {
      this.panel.content.model!.sharedModel.deleteCell(i);
    }
  }

  private turnUndos(mark: JSONObject): Undo[] {
    const key = `${mark.session as string}/${mark.turn as number}`;
    if (!this.turns.has(key)) {
      this.turns.set(key, []);
    }
    return this.turns.get(key)!;
  }

  canUndo(): boolean {
    return this.turns.size > 0;
  }

  /** Revert the latest turn's edits, newest first (each sees the document the previous left). */
  undoTurn(): void {
    const model = this.panel.content.model;
    const last = Array.from(this.turns.keys()).pop();
    if (!model || last === undefined) {
      return;
    }
    const undos = this.turns.get(last)!;
    this.turns.delete(last);
    undos.reverse().forEach(undo => undo(model));
  }

  /**
   * A cell finished running: once the turn's cell has, run the cells queued to run after
   * it, in order, through JupyterLab's own execution (outputs land in them). A queued cell
   * the person deleted meanwhile is skipped.
   */
  private ranCell(id: string): void {
    this.runQueued(id);
  }

  /** Run the queued cells waiting for the cell `after` ('' : those of a panel turn). */
  runQueued(after: string): void {
    const id = after;
    const due = this.queued.filter(q => q.cell !== id && (q.after === '' || q.after === id));
    if (!due.length) {
      return;
    }
    this.queued = this.queued.filter(q => !due.includes(q));
    void (async () => {
      for (const { cell } of due) {
        const i = this.index(cell);
        const widget = i === null ? null : this.panel.content.widgets[i];
        if (widget instanceof CodeCell) {
          await CodeCell.execute(widget, this.panel.sessionContext);
        }
      }
    })();
  }

  private focus(cell: Cell | null): void {
    if (this.comm) {
      send(this.comm, { type: 'focus', cell: cell?.model.id ?? null });
    }
  }

  /** The notebook's cells (and how many other people share it), as the kernel accepts them. */
  private answer(): Pick<ICellsMessage, 'cells' | 'collaborators'> {
    return { cells: this.cells(), collaborators: otherPeople(this.panel) };
  }

  /** The notebook's cells as the kernel's channel accepts them, bounded in size. */
  private cells(): INotebookCell[] {
    const model = this.panel.content.model;
    const cells: INotebookCell[] = [];
    let size = 0;
    for (let i = 0; model && i < model.cells.length && i < MAX_CELLS; i++) {
      const cell = model.cells.get(i);
      const shared = cell.sharedModel.toJSON() as JSONObject;
      const summary: INotebookCell = {
        id: cell.id,
        cell_type: cell.type as CellType,
        source: cell.sharedModel.getSource().slice(0, MAX_SOURCE_CHARS),
        execution_count: (shared.execution_count as number | null | undefined) ?? null,
        outputs: outputsOf(shared)
      };
      const mark = cell.sharedModel.getMetadata('agent_kernel');
      if (mark !== undefined) {
        summary.agent_kernel = reportedMark(mark);
      }
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

/**
 * The mark an agent's cell carries (cellmark.ts checks it): the session and turn, and when
 * the session had read untrusted content, `untrusted` and the first few sources.
 */
function markOf(metadata: unknown): JSONObject {
  return checkedMark((metadata as JSONObject | null)?.agent_kernel) ?? { session: '', turn: 0 };
}

/**
 * The mark a cell keeps when a turn replaces or moves it: the new turn's, still untrusted
 * when the cell was (only the person clears that mark: cellmark.ts).
 */
function mergedMark(old: unknown, mark: JSONObject): JSONObject {
  const before = untrustedSources(old);
  if (before === null || mark.untrusted) {
    return mark;
  }
  return { ...mark, untrusted: true, sources: before };
}

/** What an `edit` request comes to: the `edited` answer without its type and id. */
type EditOutcome = Omit<IEditedMessage, 'type' | 'id'>;

/** Send one of our messages on `comm`. */
function send(comm: Kernel.IComm, message: FrontEndMessage): void {
  comm.send(json(message));
}

/** A message as the comm's JSON (every field of ours is JSON). */
function json(message: FrontEndMessage): JSONObject {
  return message as unknown as JSONObject;
}

/** A kernel message type this switch does not know: the compiler says so, at run time it is ignored. */
function unexpected(message: never): void {
  void message;
}

/**
 * Why the kernel's `edit` request cannot be applied, or '' when it is well formed. The request
 * came from the kernel: each field is checked here, whatever its declared type.
 */
function checkEdit(data: IEditRequest): string {
  const { op, cell, after, cell_type: cellType, source } = data as unknown as JSONObject;
  if (!['insert', 'replace', 'delete', 'move'].includes(op as string)) {
    return 'op is insert, replace, delete or move';
  }
  if (op === 'insert' && cellType !== 'code' && cellType !== 'markdown') {
    return 'only code or markdown cells can be inserted';
  }
  if ((op === 'insert' || op === 'replace') && (typeof source !== 'string' || source.length > MAX_EDIT_CHARS)) {
    return `source is text of at most ${MAX_EDIT_CHARS} characters`;
  }
  if (op !== 'insert' && (typeof cell !== 'string' || !CELL_ID.test(cell))) {
    return 'cell is a cell id';
  }
  if ((op === 'insert' || op === 'move') && (typeof after !== 'string' || !CELL_ID.test(after))) {
    return 'after is a cell id';
  }
  if (
    data.run !== undefined &&
    (typeof data.run !== 'boolean' || (data.run && !((op === 'insert' && cellType === 'code') || op === 'replace')))
  ) {
    return 'only an inserted or replaced code cell can run';
  }
  if (data.turn_cell !== undefined && (typeof data.turn_cell !== 'string' || !CELL_ID.test(data.turn_cell))) {
    return 'turn_cell is a cell id';
  }
  if (data.ask !== undefined && typeof data.ask !== 'boolean') {
    return 'ask is true or false';
  }
  if (data.base !== undefined && (typeof data.base !== 'string' || !SOURCE_VERSION.test(data.base))) {
    return 'base is the version of a source';
  }
  if (data.metadata !== undefined && checkedMark((data.metadata as JSONObject | null)?.agent_kernel) === null) {
    return 'metadata.agent_kernel is {session, turn, untrusted?, sources?} within its sizes';
  }
  return '';
}

function isRequestId(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 2 ** 31;
}

/** Each output as its kind, its text (truncated) and which images it holds. */
function outputsOf(cell: JSONObject): ICellOutput[] {
  const outputs = Array.isArray(cell.outputs) ? (cell.outputs as JSONObject[]) : [];
  return outputs.slice(0, MAX_OUTPUTS).map(output => {
    const data = (output.data ?? {}) as JSONObject;
    const text = (output.text ?? data['text/plain'] ?? output.evalue ?? '') as string | string[]; // nbformat's shapes
    return {
      output_type: (output.output_type as string | undefined) ?? '',
      text: (Array.isArray(text) ? text.join('') : String(text)).slice(0, MAX_OUTPUT_CHARS),
      images: Object.keys(data).filter(mime => mime.startsWith('image/'))
    };
  });
}
