/**
 * A session belongs to the notebook document, not to the name it had when its kernel
 * started. The notebook channel (channel.ts) tells the kernel where the notebook is: the
 * server's root with its `hello`, and the new path when the notebook is renamed, moved or
 * saved as a copy (`moved`). The server re-files the sessions of a renamed notebook
 * (agent_kernel/server/moves.py); the kernel does too when no server did, and starts a
 * session of its own for a copy.
 *
 * What shows a notebook's sessions (the chat, the dashboard) listens here: it hears when the
 * notebook it shows was renamed (look its sessions up under the new path) and when a turn of
 * its session ended, sent from a cell or from the chat (reload the history and the meter).
 *
 * A saved notebook also carries an id of its own (`notebookDocument`), sent with `hello` and
 * `moved`: the kernel records where it last saw that id and, when the notebook turns up
 * elsewhere after a move on disk, re-files its sessions there.
 */
import { PageConfig } from '@jupyterlab/coreutils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { UUID } from '@lumino/coreutils';
import type { JSONObject } from '@lumino/coreutils';

/** Why a notebook's sessions should be looked up again. */
export type SessionsChange = 'moved' | 'turn_ended';

type Listener = (panel: NotebookPanel, change: SessionsChange) => void;

const listeners = new Set<Listener>();

/**
 * The server re-files a renamed notebook's sessions after the rename itself has answered:
 * a view that looked at once looks again after these delays (ms).
 */
const MOVED_AGAIN_MS = [1_500, 5_000];

/** Call `listener` whenever a notebook's sessions change; the returned function stops it. */
export function onSessionsChanged(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Tell every listener that `panel`'s sessions changed (channel.ts calls it). */
export function sessionsChanged(panel: NotebookPanel, change: SessionsChange): void {
  const tell = (): void => {
    if (!panel.isDisposed) {
      listeners.forEach(listener => listener(panel, change));
    }
  };
  tell();
  if (change === 'moved') {
    MOVED_AGAIN_MS.forEach(ms => window.setTimeout(tell, ms));
  }
}

/**
 * The server's root directory as the page was given it (the notebook's absolute path is
 * root/path, as Jupyter Server names it to a kernel); undefined when the page does not say.
 */
export function serverRoot(): string | undefined {
  const root = PageConfig.getOption('serverRoot');
  return root && (root.startsWith('/') || root.startsWith('~') || /^[A-Za-z]:[\\/]/.test(root)) ? root : undefined;
}

/** A notebook's id as the kernel accepts it: a uuid in lower case. */
const DOCUMENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The notebook's id (`metadata.agent_kernel.document`): it stays with the file wherever it is
 * moved, in Jupyter or on disk, so the kernel finds the notebook's sessions again. Undefined
 * before a save gave it one.
 */
export function notebookDocument(panel: NotebookPanel): string | undefined {
  const metadata = panel.context.model?.getMetadata('agent_kernel');
  const id = metadata && typeof metadata === 'object' ? (metadata as JSONObject)['document'] : undefined;
  return typeof id === 'string' && DOCUMENT_ID.test(id) ? id : undefined;
}

/**
 * Give the notebook an id as part of a save the person makes, never on open (that would mark
 * every notebook opened as changed): the context says 'started' before it serialises the
 * model, so the id written then is in the saved file. `saved` hears the id once that save
 * completed.
 */
export function nameOnSave(panel: NotebookPanel, saved: (id: string) => void): void {
  let written: string | undefined;
  panel.context.saveState.connect((_, state) => {
    if (state === 'started' && !notebookDocument(panel)) {
      const model = panel.context.model;
      const metadata = model.getMetadata('agent_kernel');
      written = UUID.uuid4();
      model.setMetadata('agent_kernel', {
        ...(metadata && typeof metadata === 'object' ? (metadata as JSONObject) : {}),
        document: written
      });
    } else if (state === 'completed' && written) {
      saved(written);
      written = undefined;
    } else if (state === 'failed') {
      written = undefined;
    }
  });
}
