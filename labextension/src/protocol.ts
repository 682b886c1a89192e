/**
 * The messages on the notebook channel (channel.ts), one interface each. The kernel's
 * agent_kernel/kernel/protocol.py declares the same messages as TypedDicts (the names without
 * the leading I); tests/kernel/test_protocol.py fails when the two disagree on a message's
 * `type`, its keys or which keys may be left out (`?` here, NotRequired there).
 *
 * The kernel checks every message the front end sends; the front end checks each field of a
 * kernel's message before it acts on it (channel.ts): these types say what the fields are
 * once checked.
 */
import type { JSONObject } from '@lumino/coreutils';

export const PROTOCOL = 1;

export type CellType = 'code' | 'markdown' | 'raw';
export type EditOp = 'insert' | 'replace' | 'delete' | 'move';

// -- the front end's messages

/** The front end's first message on a comm: which notebook it shows. */
export interface IHelloMessage {
  type: 'hello';
  protocol: number;
  notebook: string;
}

/** The selected cell changed (null or missing: no cell is selected). */
export interface IFocusMessage {
  type: 'focus';
  cell?: string | null;
}

/** One output of a cell, summarised. */
export interface ICellOutput {
  output_type: string;
  text: string;
  images: string[];
}

/** One cell of a `cells` answer. */
export interface INotebookCell {
  id: string;
  cell_type: CellType;
  source: string;
  execution_count?: number | null;
  outputs?: ICellOutput[];
  agent_kernel?: JSONObject;
  truncated?: boolean;
}

/** The answer to `read`: the notebook's cells in order. */
export interface ICellsMessage {
  type: 'cells';
  id: number;
  cells: INotebookCell[];
  collaborators?: number;
}

/** The answer to `edit`: the cell made or changed, or `error` saying why not. */
export interface IEditedMessage {
  type: 'edited';
  id: number;
  cell?: string;
  error?: string;
  rejected?: boolean;
}

export type FrontEndMessage = IHelloMessage | IFocusMessage | ICellsMessage | IEditedMessage;

// -- the kernel's messages

/** The data of a comm the kernel opens: the front end answers on a comm of its own. */
export interface IKernelAnnouncement {
  type: 'kernel';
  protocol: number;
}

/** The kernel accepted our `hello`. */
export interface IWelcomeMessage {
  type: 'welcome';
  protocol: number;
}

/** Asks for the notebook's cells (answered with `cells`). */
export interface IReadRequest {
  type: 'read';
  id: number;
}

/** Asks for one edit of the notebook (answered with `edited`). */
export interface IEditRequest {
  type: 'edit';
  id: number;
  op: EditOp;
  cell?: string;
  after?: string;
  cell_type?: 'code' | 'markdown';
  source?: string;
  metadata?: JSONObject;
  ask?: boolean;
  run?: boolean;
  turn_cell?: string;
}

/** The request `id` is no longer awaited: take down its diff. */
export interface IWithdrawMessage {
  type: 'withdraw';
  id: number;
}

/** The kernel refused our last message, and why. */
export interface IRefusedMessage {
  type: 'refused';
  reason: string;
}

export type KernelMessage =
  IKernelAnnouncement | IWelcomeMessage | IReadRequest | IEditRequest | IWithdrawMessage | IRefusedMessage;

const KERNEL_TYPES: ReadonlySet<string> = new Set<KernelMessage['type']>([
  'kernel',
  'welcome',
  'read',
  'edit',
  'withdraw',
  'refused'
]);

/**
 * `data` as one of the kernel's messages by its `type` (null: not one of ours). Only the type
 * is known then: the receiver checks each field it reads.
 */
export function kernelMessage(data: unknown): KernelMessage | null {
  const type = (data as JSONObject | null)?.type;
  return typeof type === 'string' && KERNEL_TYPES.has(type) ? (data as KernelMessage) : null;
}
