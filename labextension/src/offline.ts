/**
 * "Agent: offline scripted model" in JupyterLab's status bar when the server's model is the
 * offline scripted one (`agent-kernel lab --offline`), so no answer is taken for Claude's.
 * The server says so at /agent-kernel/api/offline (agent_kernel/server/offline.py); the
 * answer is checked here before it is shown.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';

import { request } from './api';

export const OFFLINE_LABEL = 'Agent: offline scripted model';
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;

/** What GET /offline answers (OfflineStatusJson). */
export interface IOfflineStatus {
  offline: boolean;
  model: string | null;
}

/** `value` as an offline status, or null when it is not one. */
export function offlineStatus(value: unknown): IOfflineStatus | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const { offline, model } = value as Record<string, unknown>;
  if (offline === false && model === null) {
    return { offline, model };
  }
  if (offline === true && typeof model === 'string' && MODEL.test(model)) {
    return { offline, model };
  }
  return null;
}

/** The status bar item: its text, and what it means on hover and to a screen reader. */
export function offlineItem(model: string): Widget {
  const item = new Widget();
  item.addClass('ak-offline-status');
  item.node.textContent = OFFLINE_LABEL;
  const meaning = `Answers come from the offline scripted model (${model}) on this machine, not from Claude.`;
  item.node.title = meaning;
  item.node.setAttribute('role', 'status');
  item.node.setAttribute('aria-label', `${OFFLINE_LABEL}. ${meaning}`);
  return item;
}

export const offlinePlugin: JupyterFrontEndPlugin<void> = {
  id: 'agent-kernel:offline',
  description: 'Says in the status bar when the offline scripted model answers.',
  autoStart: true,
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, statusBar: IStatusBar | null) => {
    if (!statusBar) {
      return;
    }
    void request<unknown>('offline')
      .then(answer => {
        const status = offlineStatus(answer);
        if (status === null) {
          console.warn('agent-kernel: the server answered an offline status of an unknown shape', answer);
        } else if (status.offline && status.model) {
          statusBar.registerStatusItem('agent-kernel:offline', {
            item: offlineItem(status.model),
            align: 'left',
            rank: 1000
          });
        }
      })
      .catch(error => console.warn('agent-kernel: offline status:', error));
  }
};
