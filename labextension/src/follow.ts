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
 */
import { PageConfig } from '@jupyterlab/coreutils';
import type { NotebookPanel } from '@jupyterlab/notebook';

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
