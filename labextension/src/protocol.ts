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
  root?: string; // the server's root directory: the notebook's absolute path is root/notebook
  document?: string; // the notebook's id (a uuid in metadata.agent_kernel.document), once saved
}

/** The notebook's path changed (renamed, moved, or saved as a copy this view now shows). */
export interface IMovedMessage {
  type: 'moved';
  notebook: string;
  old: string; // the same as notebook when a save just gave the notebook its id
  document?: string; // the notebook's id, when it has one
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

export type FrontEndMessage = IHelloMessage | IFocusMessage | ICellsMessage | IEditedMessage | IMovedMessage;

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

/**
 * Asks for one edit of the notebook (answered with `edited`). With `base` (the sourceVersion
 * of the cell's source as the model read it) a replace or delete applies only while the cell
 * still reads so; else the answer's error is CELL_CHANGED.
 */
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
  base?: string; // replace, delete: sourceVersion() of the source the model read
}

/** The request `id` is no longer awaited: take down its diff. */
export interface IWithdrawMessage {
  type: 'withdraw';
  id: number;
}

/** A turn of the session `session` (its id) ended and is stored: a chat showing it reloads. */
export interface ITurnEndedMessage {
  type: 'turn_ended';
  session: string;
}

/** The kernel refused our last message, and why. */
export interface IRefusedMessage {
  type: 'refused';
  reason: string;
}

export type KernelMessage =
  | IKernelAnnouncement
  | IWelcomeMessage
  | IReadRequest
  | IEditRequest
  | IWithdrawMessage
  | IRefusedMessage
  | ITurnEndedMessage;

const KERNEL_TYPES: ReadonlySet<string> = new Set<KernelMessage['type']>([
  'kernel',
  'welcome',
  'read',
  'edit',
  'withdraw',
  'refused',
  'turn_ended'
]);

/**
 * `data` as one of the kernel's messages by its `type` (null: not one of ours). Only the type
 * is known then: the receiver checks each field it reads.
 */
export function kernelMessage(data: unknown): KernelMessage | null {
  const type = (data as JSONObject | null)?.type;
  return typeof type === 'string' && KERNEL_TYPES.has(type) ? (data as KernelMessage) : null;
}

/** The `edited` error when an edit's `base` no longer matches the cell's source. */
export const CELL_CHANGED = 'the cell changed since it was read';

/**
 * A short version of a cell's source, the same as source_version in protocol.py: cyrb53 over
 * the string's UTF-16 code units, in hex, and its length. Not cryptographic: it tells whether
 * a cell still reads as the model read it, in a message of fixed size.
 */
export function sourceVersion(source: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < source.length; i++) {
    const unit = source.charCodeAt(i);
    h1 = Math.imul(h1 ^ unit, 2654435761);
    h2 = Math.imul(h2 ^ unit, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `${(4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16)}:${source.length}`;
}
