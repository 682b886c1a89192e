/**
 * The chat's secrets row: the secrets the notebook's kernel declared (names only, never a
 * value), where each may go, and binding one to its hosts.
 *
 * A binding is the person's, as `%agent_secret NAME --host HOST` is: the click sends the
 * kernel one call on a base64 literal (`bind_secret_from_panel`), which the kernel checks
 * again and refuses while a turn runs (agent_kernel/magics/panel_secrets.py). What the
 * kernel answers is checked here before anything is drawn from it.
 */
import type { Kernel } from '@jupyterlab/services';

import { el } from './dom';
import { encodePayload, kernelCall } from './kernelcall';

const MODULE = "__import__('agent_kernel.magics.panel_secrets', fromlist=['secrets_state'])";

/** Limits the kernel checks too (agent_kernel/secrets.py): refused here first. */
export const SECRET_LIMITS = { hosts: 100, hostChars: 261, nameChars: 200, rows: 500 };

export interface ISecretRow {
  name: string;
  source: 'typed' | 'environment';
  set: boolean;
  hosts: string[];
  configured: string[];
  allowed: string[];
  decided_by: Record<string, string>;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// A DNS name or an IPv4 address, or an IPv6 address in brackets, then maybe a port.
const HOST =
  /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

const isHostList = (v: unknown): v is string[] =>
  Array.isArray(v) &&
  v.length <= SECRET_LIMITS.hosts &&
  v.every(h => typeof h === 'string' && h.length > 0 && h.length <= SECRET_LIMITS.hostChars);

/** The kernel's answer as rows, or null when it is not the shape the kernel sends. */
export function secretRows(value: unknown): ISecretRow[] | null {
  if (!Array.isArray(value) || value.length > SECRET_LIMITS.rows) {
    return null;
  }
  for (const row of value) {
    if (
      !row ||
      typeof row !== 'object' ||
      typeof row.name !== 'string' ||
      !NAME.test(row.name) ||
      row.name.length > SECRET_LIMITS.nameChars ||
      (row.source !== 'typed' && row.source !== 'environment') ||
      typeof row.set !== 'boolean' ||
      !isHostList(row.hosts) ||
      !isHostList(row.configured) ||
      !isHostList(row.allowed) ||
      !row.decided_by ||
      typeof row.decided_by !== 'object' ||
      Object.entries(row.decided_by).some(
        ([k, v]) => k.length > SECRET_LIMITS.hostChars || typeof v !== 'string' || v.length > 400
      )
    ) {
      return null;
    }
  }
  return value as ISecretRow[];
}

/** The hosts typed in the box (spaces or commas between them), or why they cannot be sent. */
export function parseHosts(text: string): string[] | string {
  const hosts = [...new Set(text.split(/[\s,]+/).filter(Boolean))];
  if (hosts.length > SECRET_LIMITS.hosts) {
    return `a secret is bound to at most ${SECRET_LIMITS.hosts} hosts`;
  }
  const bad = hosts.find(h => h.length > SECRET_LIMITS.hostChars || !HOST.test(h));
  if (bad !== undefined) {
    return `${JSON.stringify(bad.slice(0, 80))} is not a host: give the name alone (api.example.com, or api.example.com:8443 for one port), no scheme, path or wildcard`;
  }
  return hosts;
}

/** The row's line for one secret: where it goes now. */
export function whereItGoes(row: ISecretRow): string {
  if (!row.set) {
    return 'not set in this kernel';
  }
  if (row.hosts.length) {
    return `goes to ${row.hosts.join(', ')} only`;
  }
  return row.allowed.length
    ? `bound to no host; allowed to ${row.allowed.join(', ')}; other hosts ask`
    : 'bound to no host: each host asks you once';
}

type Say = (text: string, state: 'idle' | 'error') => void;

/** The collapsible row under the chat's settings; opening it reads the kernel again. */
export class SecretsRow {
  readonly node = el('details', { className: 'ak-chat-secrets', hidden: true });

  constructor(
    private kernel: () => Kernel.IKernelConnection | null,
    private say: Say,
    private busy: () => boolean
  ) {
    this.node.addEventListener('toggle', () => {
      if (this.node.open) {
        void this.refresh(); // a secret typed in a cell since
      }
    });
  }

  /** Read the kernel's secrets and draw them (hidden for a kernel without agent_kernel). */
  async refresh(): Promise<void> {
    const kernel = this.kernel();
    if (!kernel) {
      this.draw(null);
      return;
    }
    try {
      this.draw(secretRows(await kernelCall(kernel, '', `${MODULE}.secrets_state()`)));
    } catch {
      this.draw(null); // a kernel without agent_kernel installed
    }
  }

  private draw(rows: ISecretRow[] | null): void {
    this.node.hidden = rows === null;
    const open = this.node.open;
    this.node.replaceChildren(
      el(
        'summary',
        { title: "Where each secret of this kernel may go: {secret:NAME} in fetch_url and the browser's typing" },
        `Secrets (${rows?.length ?? 0})`
      ),
      ...(rows?.length
        ? rows.map(row => this.line(row))
        : [
            el(
              'div',
              { className: 'ak-muted' },
              'No secret in this kernel: %agent_secret NAME --host HOST asks for one and binds it.'
            )
          ])
    );
    this.node.open = open;
  }

  private line(row: ISecretRow): HTMLElement {
    const own = row.hosts.filter(h => !row.configured.includes(h));
    const input = el('input', {
      className: 'ak-chat-secret-hosts jp-mod-styled',
      type: 'text',
      value: own.join(' '),
      placeholder: 'api.example.com',
      'aria-label': `Hosts ${row.name} may go to`,
      maxLength: SECRET_LIMITS.hosts * (SECRET_LIMITS.hostChars + 1)
    });
    const configured = row.configured.length
      ? el(
          'span',
          { className: 'ak-muted', title: 'Set in AgentKernel.secret_hosts; change it there.' },
          ` also ${row.configured.join(', ')} (AgentKernel.secret_hosts)`
        )
      : null;
    const decided = Object.entries(row.decided_by)
      .map(([h, by]) => `${h}: ${by}`)
      .join('\n');
    return el(
      'div',
      { className: 'ak-chat-secret', 'data-name': row.name },
      el('code', {}, row.name),
      el(
        'span',
        {
          className: 'ak-muted ak-chat-secret-where',
          title: decided || (row.source === 'typed' ? 'typed with %agent_secret' : 'named in AgentKernel.secret_env')
        },
        ` ${whereItGoes(row)}`
      ),
      configured,
      input,
      el(
        'button',
        {
          className: 'ak-button ak-chat-secret-bind',
          title: 'Bind to these hosts only (empty: bound to none, each host asks you once)',
          onclick: () => void this.bind(row.name, input.value)
        },
        'Bind'
      )
    );
  }

  private async bind(name: string, text: string): Promise<void> {
    const hosts = parseHosts(text);
    if (typeof hosts === 'string') {
      this.say(`Not bound: ${hosts}.`, 'error');
      return;
    }
    const kernel = this.kernel();
    if (!kernel || this.busy()) {
      this.say(
        kernel ? "Wait for the turn to end: a binding is yours, not a turn's." : 'This notebook has no kernel.',
        'error'
      );
      return;
    }
    const code = `${MODULE}.bind_secret_from_panel('${encodePayload({ name, hosts })}')`;
    try {
      const rows = secretRows(await kernelCall(kernel, code, `${MODULE}.secrets_state()`));
      this.draw(rows);
      this.say(
        hosts.length
          ? `{secret:${name}} goes to ${hosts.join(', ')} only.`
          : `{secret:${name}} is bound to no host: each host asks you once.`,
        'idle'
      );
    } catch (error) {
      this.say(`Not bound: ${(error as Error).message}`, 'error');
      await this.refresh();
    }
  }
}
