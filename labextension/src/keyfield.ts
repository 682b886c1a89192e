/**
 * The chat's key field: the Anthropic API key typed into a password box and sent once to
 * the Jupyter server (PUT /agent-kernel/api/key), which stores it outside every notebook
 * (the OS keyring, else a file only its owner can read: agent_kernel/model/keys.py).
 *
 * The key never goes through a kernel's execute request, a cell or a notebook, and is never
 * shown back: the server answers where the key comes from, which is checked here before it
 * is drawn. Kernels, inline completion, Explain and scheduled runs find the stored key.
 */
import { request } from './api';
import { el } from './dom';

const ROUTE = 'key';
// The server refuses longer keys too (agent_kernel/model/keys.py MAX_KEY_CHARS).
export const MAX_KEY_CHARS = 500;
const SOURCES = ['environment', 'keyring', 'file', 'none'] as const;
/** Sent on `document` when the key was stored or forgotten here (completion asks again). */
export const KEY_CHANGED = 'agent-kernel:key-changed';

/** What GET, PUT and DELETE /key answer (KeyStatusJson): never the key. */
export interface IKeyStatus {
  has_key: boolean;
  source: (typeof SOURCES)[number];
  where: string;
  message: string;
}

/** `value` as a key status, or null when it is not one. */
export function keyStatus(value: unknown): IKeyStatus | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const { has_key, source, where, message } = value as Record<string, unknown>;
  if (
    typeof has_key !== 'boolean' ||
    !SOURCES.includes(source as IKeyStatus['source']) ||
    has_key !== (source !== 'none') ||
    typeof where !== 'string' ||
    where.length > 4096 ||
    typeof message !== 'string' ||
    message.length > 2000
  ) {
    return null;
  }
  return { has_key, source: source as IKeyStatus['source'], where, message };
}

/** The summary's words for a status. */
export function keySummary(status: IKeyStatus | null): string {
  if (!status) {
    return 'API key: unknown';
  }
  return {
    environment: 'API key: from the environment',
    keyring: 'API key: stored in the keyring',
    file: 'API key: stored in a file',
    none: 'API key: none'
  }[status.source];
}

/** The collapsible key row of the chat's settings (open while there is no key). */
export class KeyField {
  readonly node = el('details', { className: 'ak-chat-key' });
  private summary = el('summary', { className: 'ak-chat-key-summary' }, 'API key');
  private status = el('div', { className: 'ak-chat-key-status ak-muted', role: 'status' });
  private input = el('input', {
    className: 'ak-chat-key-input jp-mod-styled',
    type: 'password',
    autocomplete: 'off',
    spellcheck: false,
    placeholder: 'sk-ant-…',
    maxLength: MAX_KEY_CHARS,
    'aria-label': 'Anthropic API key (stored outside every notebook, never shown again)'
  });
  private saveButton = el(
    'button',
    {
      className: 'ak-button ak-chat-key-save',
      title: 'Store the key outside every notebook (the OS keyring, or a file only you can read)',
      onclick: () => void this.save()
    },
    'Save'
  );
  private forgetButton = el(
    'button',
    {
      className: 'ak-button ak-chat-key-forget',
      title: 'Remove the stored key',
      onclick: () => void this.forget()
    },
    'Forget'
  );
  private opened = false; // opened by the person: a refresh does not close it

  constructor() {
    this.input.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        event.preventDefault();
        void this.save();
      }
    });
    this.node.addEventListener('toggle', () => {
      this.opened = this.node.open;
    });
    const form = el('div', { className: 'ak-chat-key-form' }, this.input, this.saveButton, this.forgetButton);
    this.node.append(this.summary, this.status, form);
    void this.refresh();
  }

  /** Ask the server where the key comes from, and draw it. */
  async refresh(): Promise<void> {
    try {
      this.draw(keyStatus(await request<unknown>(ROUTE)));
    } catch (error) {
      this.draw(null, `The server could not say: ${(error as Error).message}`);
    }
  }

  private draw(status: IKeyStatus | null, problem?: string): void {
    this.summary.textContent = keySummary(status);
    this.status.textContent = problem ?? status?.message ?? 'The server answered something else.';
    this.forgetButton.hidden = !(status?.source === 'keyring' || status?.source === 'file');
    if (!status?.has_key) {
      this.node.open = true;
    } else if (!this.opened) {
      this.node.open = false;
    }
  }

  private async save(): Promise<void> {
    const key = this.input.value.trim();
    if (!key) {
      this.status.textContent = 'Type or paste the key first.';
      return;
    }
    await this.send({ method: 'PUT', body: JSON.stringify({ key }) }, 'Not stored');
  }

  private async forget(): Promise<void> {
    await this.send({ method: 'DELETE' }, 'Not forgotten');
  }

  private async send(init: RequestInit, failed: string): Promise<void> {
    this.saveButton.disabled = this.forgetButton.disabled = true;
    try {
      const status = keyStatus(await request<unknown>(ROUTE, init));
      this.input.value = ''; // sent once; never kept in the page
      this.opened = false;
      this.draw(status);
      document.dispatchEvent(new CustomEvent(KEY_CHANGED));
    } catch (error) {
      this.status.textContent = `${failed}: ${(error as Error).message}`;
    } finally {
      this.saveButton.disabled = this.forgetButton.disabled = false;
    }
  }
}
