/**
 * The Agent chat (its own sidebar, chatpanel.ts): a prompt box that runs an agent turn in
 * the current notebook's kernel, as an `%agent` cell would, with the turn's output shown here.
 *
 * How a turn runs: the panel sends the notebook's kernel an execute_request whose code is
 * one call, `await ...run_chat_turn('<base64>')`. The prompt, the settings row's choices
 * and the attachments travel as base64 of UTF-8 JSON: that alphabet cannot end a Python
 * string literal, so nothing typed here is ever read as code. The kernel checks the
 * payload again (agent_kernel/magics/chat.py). The request is `store_history: false`, so
 * the notebook's execution counts stay the user's, and not `silent`, so the turn's
 * displays (its transcript, widgets, Stop, approval cards, forms) reach the panel's
 * OutputArea, which renders them with the NOTEBOOK's rendermime: the widgets belong to
 * that kernel's widget manager, so they work here as in a cell. Nothing goes into the
 * notebook's cells; the turn is stored in the notebook's current session like any other.
 *
 * The settings row (model, approval, thinking, session: one toolbar under the title, each
 * choice short on screen and in full in its title and accessible name) is the notebook's defaults in its
 * kernel: each change is sent at once (`set_panel_defaults`, checked there as the `%agent`
 * flags are), so the next turn from the panel or from a cell takes it, and a cell's own
 * flags win. The row and the context meter show what the kernel answers (`panel_state`,
 * read from the request's `user_expressions`), never a guess made here.
 */
import { InputDialog } from '@jupyterlab/apputils';
import { Contents, Kernel, KernelMessage } from '@jupyterlab/services';
import { NotebookPanel, INotebookTracker } from '@jupyterlab/notebook';
import { OutputArea, OutputAreaModel } from '@jupyterlab/outputarea';
import { caretDownEmptyIcon, editIcon, LabIcon } from '@jupyterlab/ui-components';
import { Panel, Widget } from '@lumino/widgets';

import { api, IContextMeter, IPanelState, ISession, panelState } from './api';
import { panelTurnEnded } from './channel';
import { el, keepFocus, money } from './dom';
import { onSessionsChanged, SessionsChange } from './follow';
import { approveIcon, archiveIcon, modelIcon, readableName, sessionIcon, shorten, thinkIcon } from './names';
import { encodePayload, kernelCall } from './kernelcall';
import { KeyField } from './keyfield';
import { SecretsRow } from './secrets';

/** Limits the kernel checks too (agent_kernel/magics/chat.py): refused here first. */
export const LIMITS = {
  promptChars: 100_000,
  textChars: 200_000,
  imageBytes: 5_000_000,
  attachments: 20,
  nameChars: 200
};

export type AttachmentKind = 'cell' | 'selection' | 'output' | 'error' | 'file';

/** Something the person attached to the next prompt: text, or an image as base64. */
export interface IAttachment {
  kind: AttachmentKind;
  label: string;
  text?: string;
  image?: string;
  media_type?: 'image/png' | 'image/jpeg';
}

const IMAGE_TYPES = ['image/png', 'image/jpeg'] as const;
// A prompt the kernel has not started this long after it was sent is said to wait its turn
// (an idle kernel starts one within milliseconds).
const START_MS = 300;
const THINKING = ['adaptive', 'low', 'medium', 'high', 'max', 'off'];
const APPROVE: Record<string, string> = {
  auto: 'auto: the agent runs its code in this kernel without asking',
  ask: 'ask: code and other writing tools wait for your Run or Skip',
  'read-only': 'read-only: the agent only reads; writing tools are not offered'
};

/** Why an attachment cannot be sent, or null. */
export function attachmentProblem(item: IAttachment): string | null {
  if (item.label.length > LIMITS.nameChars) {
    return `its label is over ${LIMITS.nameChars} characters`;
  }
  if (item.text !== undefined && item.text.length > LIMITS.textChars) {
    return `it is over ${LIMITS.textChars.toLocaleString()} characters`;
  }
  if (item.image !== undefined) {
    if (!IMAGE_TYPES.includes(item.media_type ?? 'image/png')) {
      return 'only PNG and JPEG images can be attached';
    }
    if ((item.image.length * 3) / 4 > LIMITS.imageBytes) {
      return `the image is over ${LIMITS.imageBytes / 1_000_000} MB`;
    }
  }
  return null;
}

/** The code the kernel runs for one panel turn: one call on a base64 literal. */
export function turnCode(payload: unknown): string {
  const encoded = encodePayload(payload);
  if (!/^[A-Za-z0-9+/=]*$/.test(encoded)) {
    throw new Error('the payload did not encode to base64');
  }
  return "await __import__('agent_kernel.magics.chat', fromlist=['run_chat_turn'])" + `.run_chat_turn('${encoded}')`;
}

const CHAT_MODULE = "__import__('agent_kernel.magics.chat', fromlist=['panel_state'])";

/** The meter's line, each figure labelled: the context (the last request's tokens of the
 * model's window), the session's cost so far, and where compaction starts. */
export function meterText(m: IContextMeter): string {
  const used =
    m.used === null
      ? 'no request yet'
      : `${m.used.toLocaleString()} of ${m.window.toLocaleString()} tokens (${Math.round((100 * m.used) / m.window)}%)`;
  return `context: ${used} · session: ${m.cost === null ? 'no price' : money(m.cost)} · compacts at ${m.compact_at.toLocaleString()}`;
}

/** What the meter's tooltip explains: whose window, what the cost is, what compaction does. */
export function meterTitle(m: IContextMeter): string {
  const compaction =
    m.compaction === 'server'
      ? `Past ${m.compact_at.toLocaleString()} tokens the API compacts the conversation (AgentKernel.compaction = server).`
      : `Past ${m.compact_at.toLocaleString()} tokens (AgentKernel.compact_at of the window) the conversation is compacted: first ${m.steps.join('; then ')} (${m.summary_model}).`;
  return (
    `Context: the last request of session ${m.session} on ${m.model} was ${m.used === null ? 'not sent yet' : m.used.toLocaleString() + ' tokens'} of the ${m.window.toLocaleString()}-token context window.\n` +
    `Session so far: ${m.cost === null ? 'no priced call' : money(m.cost)}${m.unpriced_calls ? ` + ${m.unpriced_calls} unpriced calls` : ''}; ` +
    `${m.tokens.toLocaleString()} of its ${m.token_limit.toLocaleString()}-token limit (every call since it started, cache reads at a tenth: the session figure of a turn's footer, whose "this turn" counts every token the turn sent and received).\n` +
    compaction
  );
}

/** Terminal colour codes out of a traceback, for the model and for a chip. */
export function plainText(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
}

export class ChatView extends Panel {
  constructor(private notebooks: INotebookTracker | null) {
    super();
    this.addClass('ak-chat');
    this.head.node.append(
      el('div', { className: 'ak-chat-title' }, el('h3', {}, 'Chat'), withCaret(this.notebookSelect)),
      this.settingsNode,
      this.meterNode
    );
    this.head.addClass('ak-chat-head');
    this.addWidget(this.head);
    this.log.addClass('ak-chat-log');
    this.log.node.append(this.historyNode);
    this.log.addWidget(this.turns);
    // The turns as a log: a screen reader reads each answer as it streams in, politely.
    this.turns.addClass('ak-chat-turns');
    this.turns.node.setAttribute('role', 'log');
    this.turns.node.setAttribute('aria-live', 'polite');
    this.turns.node.setAttribute('aria-label', 'Chat turns');
    keepFocus(this.turns.node); // an answered card is redrawn as a line of the transcript
    this.addWidget(this.log);
    this.foot.addClass('ak-chat-foot');
    this.foot.node.append(this.statusNode, this.approveNote, this.secrets.node, this.chipsNode, this.composer());
    this.foot.node.prepend(new KeyField().node); // the API key, stored outside every notebook (keyfield.ts)
    this.addWidget(this.foot);
    this.drawSettings();
    notebooks?.currentChanged.connect(() => {
      if (!this.pinned) {
        this.follow(notebooks.currentWidget);
      }
    });
    this.follow(notebooks?.currentWidget ?? null);
    onSessionsChanged((panel, change) => this.sessionsChanged(panel, change));
  }

  /** Called when a panel turn ends (the dashboard below refreshes its sessions). */
  turnEnded: (() => void) | null = null;

  /** The notebook whose kernel the next prompt goes to. */
  get notebook(): NotebookPanel | null {
    return this.target && !this.target.isDisposed ? this.target : null;
  }

  get prompt(): string {
    return this.input.value;
  }

  /** Put `text` in the prompt box (Fix with agent, Explain) and focus it. */
  setPrompt(text: string): void {
    this.input.value = text;
    this.focusPrompt();
  }

  /** Focus the prompt box, also after the click that opened the panel settles (a cell
   * toolbar button's cell takes the focus back when its click ends). */
  focusPrompt(): void {
    this.input.focus();
    window.setTimeout(() => requestAnimationFrame(() => this.input.focus()), 0);
  }

  /** Attach `item` to the next prompt; an item that cannot be sent says why. */
  attach(item: IAttachment): boolean {
    const problem = attachmentProblem(item);
    if (problem) {
      this.say(`Cannot attach ${item.label}: ${problem}.`, 'error');
      return false;
    }
    if (this.attachments.length >= LIMITS.attachments) {
      this.say(`At most ${LIMITS.attachments} attachments a prompt.`, 'error');
      return false;
    }
    this.attachments.push(item);
    this.drawChips();
    return true;
  }

  /** Follow `panel` (the active notebook, or one picked in the switch). */
  follow(panel: NotebookPanel | null): void {
    if (panel === this.target) {
      return;
    }
    this.target = panel;
    this.sessionChoice = '';
    this.sentTurns = 0;
    this.drawNotebooks();
    void this.loadSessions();
    void this.refreshState();
    this.updateStatus();
  }

  /**
   * The followed notebook was renamed or moved (its sessions are found under its new path),
   * or a turn of its session ended: from a cell, its history reloads; from this chat (its
   * turn is shown already), only the switch and the meter.
   */
  private sessionsChanged(panel: NotebookPanel, change: SessionsChange): void {
    if (panel !== this.target) {
      return;
    }
    let history = true;
    if (change === 'moved') {
      this.drawNotebooks();
      this.updateStatus();
    } else if (this.sentTurns > 0) {
      this.sentTurns -= 1;
      history = false;
    }
    void this.loadSessions(history);
    void this.refreshState();
  }

  /** Send the prompt box's text and the attachments as one turn in the notebook's kernel. */
  async send(): Promise<void> {
    const prompt = this.input.value.trim();
    if (!prompt || this.future) {
      return;
    }
    if (prompt.length > LIMITS.promptChars) {
      this.say(`The prompt is over ${LIMITS.promptChars.toLocaleString()} characters.`, 'error');
      return;
    }
    const panel = this.notebook;
    const kernel = panel?.sessionContext.session?.kernel ?? null;
    if (!panel || !kernel) {
      this.say(
        panel
          ? 'This notebook has no kernel: start one (Kernel menu) to chat.'
          : 'Open a notebook to chat with its agent.',
        'error'
      );
      this.aboutKernel = true;
      return;
    }
    await this.pushing; // the row's last change reached the kernel first
    const payload: Record<string, unknown> = { prompt };
    if (this.attachments.length) {
      payload.attachments = this.attachments;
    }
    const output = new OutputArea({
      model: new OutputAreaModel({ trusted: true }),
      rendermime: panel.content.rendermime
    });
    output.addClass('ak-chat-output');
    const turn = new Panel();
    turn.addClass('ak-chat-turn');
    const asked = new Widget({ node: el('div', { className: 'ak-chat-prompt' }, prompt) });
    for (const item of this.attachments) {
      asked.node.append(
        el('span', { className: 'ak-chip ak-chip-sent', title: item.label }, `${item.kind}: ${item.label}`)
      );
    }
    turn.addWidget(asked);
    turn.addWidget(output);
    this.turns.addWidget(turn);
    turn.node.scrollIntoView({ block: 'nearest' });
    this.input.value = '';
    this.attachments = [];
    this.newSession = false;
    this.drawChips();
    const waits = () => this.say('The kernel is busy: your prompt waits its turn.', 'waiting');
    const runs = () => this.say("Running in the notebook's kernel: Escape stops.", 'running');
    if (kernel.status !== 'idle') {
      waits();
    } else {
      runs();
    }
    this.sentTurns += 1; // its turn_ended reloads no history: the turn is shown here
    const future = kernel.requestExecute(
      { code: turnCode(payload), silent: false, store_history: false, allow_stdin: true, stop_on_error: false },
      false,
      { agentKernelChat: true }
    );
    this.future = future;
    this.kernel = kernel;
    this.node.dataset.running = 'true';
    output.future = future;
    // The kernel's status can read idle while a cell still runs (another request's status
    // message came last): a prompt the kernel has not started a moment later waits its turn.
    let started = false;
    const notStarted = window.setTimeout(() => {
      if (!started && this.future === future) {
        waits();
      }
    }, START_MS);
    future.onIOPub = chain(future.onIOPub, msg => {
      if (msg.header.msg_type === 'execute_input') {
        started = true;
        runs();
      }
    });
    try {
      const reply = await future.done;
      const failed = reply?.content.status === 'error';
      this.say(failed ? 'The turn did not finish: see above.' : '', failed ? 'error' : 'idle');
    } catch (error) {
      this.say(`The kernel did not answer: ${(error as Error).message}`, 'error');
    } finally {
      window.clearTimeout(notStarted);
      if (this.future === future) {
        this.future = null;
        this.kernel = null;
      }
      delete this.node.dataset.running;
      panelTurnEnded(panel); // cells the turn's edits queued to run (a fix, accepted)
      void this.loadSessions(false);
      void this.refreshState();
      this.turnEnded?.();
    }
  }

  /** Stop the running turn: the kernel's interrupt, which the turn takes as its Stop. */
  async stop(): Promise<void> {
    if (this.future && this.kernel) {
      this.say('Stopping…', 'running');
      await this.kernel.interrupt();
    }
  }

  // -- the prompt box ------------------------------------------------------------------------

  private composer(): HTMLElement {
    this.input.addEventListener('keydown', (event: KeyboardEvent) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        event.stopPropagation();
        void this.send();
      }
    });
    // Escape anywhere in the chat (the prompt box, a turn's output) stops the running turn.
    this.node.addEventListener('keydown', (event: KeyboardEvent) => {
      if (event.key === 'Escape' && this.future) {
        event.preventDefault();
        event.stopPropagation();
        void this.stop();
      }
    });
    const sendButton = el(
      'button',
      {
        className: 'jp-Button jp-mod-styled jp-mod-accept ak-chat-send',
        title: 'Send (Enter)',
        onclick: () => void this.send()
      },
      'Send'
    );
    const stopButton = el(
      'button',
      {
        className: 'jp-Button jp-mod-styled jp-mod-warn ak-chat-stop',
        title: 'Stop the turn (Escape)',
        onclick: () => void this.stop()
      },
      'Stop'
    );
    return el(
      'div',
      { className: 'ak-chat-composer' },
      this.input,
      el('div', { className: 'ak-chat-buttons' }, sendButton, stopButton)
    );
  }

  private say(text: string, state: 'idle' | 'waiting' | 'running' | 'error'): void {
    this.statusNode.textContent = text;
    this.statusNode.dataset.state = state;
  }

  private updateStatus(): void {
    if (this.future) {
      return;
    }
    const panel = this.notebook;
    if (!panel) {
      this.say('Open a notebook to chat with its agent.', 'idle');
      this.aboutKernel = true;
    } else if (!panel.sessionContext.session?.kernel) {
      this.say('This notebook has no kernel: start one to chat.', 'idle');
      this.aboutKernel = true;
    } else if (this.aboutKernel) {
      this.say('', 'idle'); // only a line about the missing kernel is cleared
      this.aboutKernel = false;
    }
  }

  // -- the notebook switch -------------------------------------------------------------------

  private drawNotebooks(): void {
    const open: NotebookPanel[] = [];
    this.notebooks?.forEach(nb => void open.push(nb));
    this.notebookSelect.replaceChildren(
      el('option', { value: '', selected: !this.pinned, title: 'Follow the active notebook' }, 'Active notebook'),
      ...open.map(nb =>
        el(
          'option',
          { value: nb.id, selected: this.pinned && nb === this.target, title: nb.context.path },
          shorten(nb.context.localPath.split('/').pop() ?? nb.context.path)
        )
      )
    );
    this.notebookSelect.title = this.target
      ? `Prompts go to ${this.target.context.path}'s kernel${this.pinned ? '' : ' (the chat follows the active notebook)'}`
      : 'No notebook';
    this.notebookSelect.setAttribute('aria-label', `Notebook: ${this.notebookSelect.title}`);
    if (this.target && this.lastStatusTarget !== this.target) {
      this.lastStatusTarget = this.target;
      const target = this.target;
      target.sessionContext.statusChanged.connect((_, status) => {
        // A restarted kernel has lost the row's defaults: the row shows what it holds now.
        if (status === 'restarting' || status === 'autorestarting') {
          this.restarted = true;
        } else if (status === 'idle' && this.restarted && target === this.target) {
          this.restarted = false;
          void this.refreshState();
        }
        this.updateStatus();
      });
      target.sessionContext.kernelChanged.connect(() => {
        this.updateStatus();
        if (target === this.target) {
          void this.refreshState();
        }
      });
    }
  }

  private onPickNotebook = (): void => {
    const id = this.notebookSelect.value;
    this.pinned = id !== '';
    let picked: NotebookPanel | null = null;
    this.notebooks?.forEach(nb => {
      if (nb.id === id) {
        picked = nb;
      }
    });
    this.target = null;
    this.follow(picked ?? this.notebooks?.currentWidget ?? null);
  };

  // -- settings: the %agent flags' fields for the next turn ----------------------------------

  /** The row's choices, as `set_panel_defaults` takes them. */
  private settings(): Record<string, unknown> {
    const chosen: Record<string, unknown> = {};
    const model = this.modelSelect.value;
    if (model && (this.state?.models ?? []).includes(model)) {
      chosen.model = model;
    }
    if (this.approveSelect.value) {
      chosen.approve = this.approveSelect.value;
    }
    if (this.thinkSelect.value) {
      chosen.thinking = this.thinkSelect.value;
    }
    if (this.newSession) {
      chosen.new = true;
    } else if (this.sessionChoice) {
      chosen.session = this.sessionChoice;
    }
    return chosen;
  }

  private drawSettings(): void {
    this.approveSelect.replaceChildren(
      el('option', { value: '' }, 'Approve: default'),
      ...Object.keys(APPROVE).map(mode => el('option', { value: mode, title: APPROVE[mode] }, `Approve: ${mode}`))
    );
    this.approveSelect.title =
      'Approval of the next turns (as %agent --approve MODE):\n' + Object.values(APPROVE).join('\n');
    this.approveSelect.setAttribute('aria-label', 'Approval of the next turns');
    this.approveSelect.addEventListener('change', () => {
      this.explainApprove();
      void this.pushDefaults();
    });
    this.modelSelect.addEventListener('change', () => void this.pushDefaults());
    this.thinkSelect.addEventListener('change', () => void this.pushDefaults());
    this.drawModels();
    this.thinkSelect.replaceChildren(
      el('option', { value: '' }, 'Think: default'),
      ...THINKING.map(level => el('option', { value: level }, `Think: ${level}`))
    );
    this.thinkSelect.setAttribute('aria-label', 'Thinking of the next turns');
    this.sessionSelect.addEventListener('change', () => {
      const value = this.sessionSelect.value;
      this.newSession = value === '\u0000new';
      this.sessionChoice = this.newSession ? '' : value;
      this.drawMeter();
      void this.loadHistory();
      void this.pushDefaults();
    });
    const rename = el(
      'button',
      {
        className: 'ak-button ak-chat-rename',
        title: 'Rename this session (as %agent_sessions --rename)',
        'aria-label': 'Rename this session',
        onclick: () => void this.renameSession()
      },
      editIcon.element({ tag: 'span', className: 'ak-icon' })
    );
    const archive = el(
      'button',
      {
        className: 'ak-button ak-chat-archive',
        title: 'Archive this session (as %agent_sessions --archive; --session NAME reopens it)',
        'aria-label': 'Archive this session',
        onclick: () => void this.sessionAction({ action: 'archive' })
      },
      archiveIcon.element({ tag: 'span', className: 'ak-icon' })
    );
    this.settingsNode.append(
      compactSelect(this.modelSelect, modelIcon, text => text.replace(/^claude-/, '').replace(/ \(default\)$/, '')),
      compactSelect(this.thinkSelect, thinkIcon, text => text.replace(/^Think: /, '').replace(/ \(default\)$/, '')),
      compactSelect(this.approveSelect, approveIcon, text =>
        text.replace(/^Approve: /, '').replace(/ \(default\)$/, '')
      ),
      el(
        'span',
        { className: 'ak-chat-session-group' },
        compactSelect(this.sessionSelect, sessionIcon, text => shorten(text, 16)),
        rename,
        archive
      )
    );
    this.explainApprove();
  }

  private explainApprove(): void {
    const mode = this.approveSelect.value;
    const fallback = this.state?.default_approve ?? 'auto';
    this.approveNote.textContent = mode
      ? APPROVE[mode]
      : `Default approval (AgentKernel.approve): ${APPROVE[fallback] ?? fallback}.`;
  }

  /** The model switch: the configured models the kernel named, the default first. */
  private drawModels(): void {
    const state = this.state;
    const chosen = state?.defaults.model ?? '';
    this.modelSelect.replaceChildren(
      el(
        'option',
        { value: '', selected: !chosen, title: `The default model${state ? ` (${state.default_model})` : ''}` },
        state ? shorten(`${state.default_model} (default)`) : 'Default model'
      ),
      ...(state?.models ?? []).map(m => el('option', { value: m, selected: m === chosen, title: m }, shorten(m)))
    );
  }

  /** Show what the kernel holds: its configured models, the row's defaults, the meter. */
  private showState(state: IPanelState): void {
    this.state = state;
    this.drawModels();
    this.approveSelect.value = state.defaults.approve ?? '';
    this.thinkSelect.value = state.defaults.thinking ?? '';
    this.thinkSelect.options[0].textContent = `Think: ${state.default_thinking} (default)`;
    this.approveSelect.options[0].textContent = `Approve: ${state.default_approve} (default)`;
    this.explainApprove();
    this.drawMeter();
  }

  /** Read the row's state from the notebook's kernel (nothing when it has none). */
  async refreshState(): Promise<void> {
    const kernel = this.notebook?.sessionContext.session?.kernel;
    void this.secrets.refresh();
    if (!kernel) {
      return;
    }
    const session = this.newSession ? null : (this.current()?.name ?? (this.sessionChoice || null));
    const expression = `${CHAT_MODULE}.panel_state(${session ? `'${encodePayload({ name: session })}'` : ''})`;
    try {
      const state = panelState(await kernelCall(kernel, '', expression));
      if (state) {
        this.showState(state);
      }
    } catch {
      // A kernel without agent_kernel installed: the row keeps its defaults.
    }
  }

  /** Send the row's choices to the kernel as the notebook's defaults; a refusal is said here. */
  private pushDefaults(): Promise<void> {
    const kernel = this.notebook?.sessionContext.session?.kernel;
    if (!kernel) {
      this.say('This notebook has no kernel: the settings apply once one runs.', 'error');
      return Promise.resolve();
    }
    const code = `${CHAT_MODULE}.set_panel_defaults('${encodePayload(this.settings())}')`;
    const session = this.newSession ? null : (this.current()?.name ?? null);
    const expression = `${CHAT_MODULE}.panel_state(${session ? `'${encodePayload({ name: session })}'` : ''})`;
    const push = (async () => {
      try {
        const state = panelState(await kernelCall(kernel, code, expression));
        if (state) {
          this.showState(state);
          this.say("Settings apply to the next turn from the panel or a cell (a cell's flags win).", 'idle');
        }
      } catch (error) {
        this.say(`Not applied: ${(error as Error).message}`, 'error');
        await this.refreshState(); // the row shows what the kernel kept
      }
    })();
    this.pushing = push;
    return push;
  }

  private async renameSession(): Promise<void> {
    const session = this.current();
    if (!session) {
      return;
    }
    const answer = await InputDialog.getText({ title: `Rename session ${session.name}`, text: session.name });
    const name = answer.button.accept ? (answer.value ?? '').trim() : '';
    if (name && name !== session.name) {
      await this.sessionAction({ action: 'rename', new_name: name.slice(0, LIMITS.nameChars) });
    }
  }

  /** Rename or archive the current session in the notebook's kernel, as %agent_sessions does. */
  private async sessionAction(action: { action: 'rename' | 'archive'; new_name?: string }): Promise<void> {
    const session = this.current();
    const kernel = this.notebook?.sessionContext.session?.kernel;
    if (!session || !kernel || this.future) {
      this.say(this.future ? 'Wait for the turn to end.' : 'No session or no kernel.', 'error');
      return;
    }
    const code =
      "__import__('agent_kernel.magics.chat', fromlist=['run_session_action'])" +
      `.run_session_action('${encodePayload({ ...action, name: session.name })}')`;
    const reply = await kernel.requestExecute({ code, silent: true, store_history: false }).done;
    const content = reply.content as { status: string; evalue?: string };
    if (content.status !== 'ok') {
      this.say(
        `${action.action === 'rename' ? 'Rename' : 'Archive'} failed: ${content.evalue ?? 'see the kernel log'}`,
        'error'
      );
      return;
    }
    this.sessionChoice = action.action === 'rename' ? (action.new_name ?? '') : '';
    this.say(action.action === 'rename' ? `Renamed to ${action.new_name}.` : `Archived ${session.name}.`, 'idle');
    await this.loadSessions();
    await this.refreshState();
  }

  /** The notebook's sessions: the switch, the model list and the meter. */
  private async loadSessions(history = true): Promise<void> {
    const path = this.notebook?.context.path;
    if (!path) {
      this.sessions = [];
      this.drawSessions();
      this.historyNode.replaceChildren();
      return;
    }
    try {
      const found = await api.sessions(path);
      this.sessions = Array.isArray(found.sessions) ? found.sessions.filter(s => typeof s?.name === 'string') : [];
    } catch {
      this.sessions = [];
    }
    this.drawSessions();
    if (history) {
      await this.loadHistory();
    }
    if (this.state?.meter && this.state.meter.session !== this.current()?.name) {
      void this.refreshState(); // the meter follows the session shown
    }
  }

  /** The session the next turn continues: the one picked, else the notebook's latest. */
  private current(): ISession | null {
    if (this.newSession) {
      return null;
    }
    if (this.sessionChoice) {
      return this.sessions.find(s => s.name === this.sessionChoice) ?? null;
    }
    return this.sessions.find(s => !s.parent_id) ?? null;
  }

  private drawSessions(): void {
    const current = this.current();
    this.sessionSelect.replaceChildren(
      ...this.sessions
        .filter(s => !s.parent_id)
        .map(s =>
          el(
            'option',
            { value: s.name, selected: s === current, title: `Session ${s.name}` },
            shorten(readableName(s.name, s.created_at))
          )
        ),
      el('option', { value: '\u0000new', selected: this.newSession || !this.sessions.length }, 'New session')
    );
    this.sessionSelect.setAttribute('aria-label', 'Session the next turn continues');
    this.sessionSelect.title = 'The session the next turn continues (as %agent --session NAME), or a new one (--new)';
    this.drawMeter();
  }

  private drawMeter(): void {
    const session = this.current();
    const meter = this.state?.meter ?? null;
    if (!session) {
      this.meterNode.textContent = 'new session';
      this.meterNode.title = 'The next turn starts a new session.';
      return;
    }
    if (!meter || meter.session !== session.name) {
      this.meterNode.textContent = `${money(session.cost)} so far`;
      this.meterNode.title = "The context meter shows once the notebook's kernel has loaded agent_kernel.";
      return;
    }
    this.meterNode.textContent = meterText(meter);
    this.meterNode.title = meterTitle(meter);
    this.meterNode.dataset.share = meter.used === null ? '0' : String(Math.min(1, meter.used / meter.window));
  }

  /** The session's earlier turns, above the panel's own: the prompt and the answer's text. */
  private async loadHistory(): Promise<void> {
    const session = this.current();
    if (!session) {
      this.historyNode.replaceChildren();
      return;
    }
    let messages: unknown[] = [];
    try {
      const detail = await api.session(session.id);
      messages = Array.isArray(detail.messages) ? detail.messages : [];
    } catch {
      return;
    }
    const turns = new Map<number, { prompt: string; answer: string[] }>();
    for (const message of messages) {
      const m = message as { turn?: unknown; role?: unknown; content?: unknown };
      if (typeof m.turn !== 'number' || !Array.isArray(m.content)) {
        continue;
      }
      const texts = m.content
        .filter((b: any) => b && b.type === 'text' && typeof b.text === 'string')
        .map((b: any) => b.text as string);
      const entry = turns.get(m.turn) ?? { prompt: '', answer: [] };
      if (m.role === 'user' && !entry.prompt && texts.length > 1) {
        entry.prompt = texts[1]; // the first block is the turn's context
      } else if (m.role === 'assistant') {
        entry.answer.push(...texts);
      }
      turns.set(m.turn, entry);
    }
    this.historyNode.replaceChildren(
      ...[...turns.entries()].map(([n, t]) =>
        el(
          'details',
          { className: 'ak-chat-earlier', 'data-turn': String(n) },
          el('summary', {}, `Turn ${n}: ${t.prompt.slice(0, 120)}`),
          el('div', { className: 'ak-chat-answer' }, t.answer.join('\n\n').slice(0, 4000))
        )
      )
    );
  }

  // -- attachments ---------------------------------------------------------------------------

  private drawChips(): void {
    this.chipsNode.replaceChildren(
      ...this.attachments.map((item, i) =>
        el(
          'span',
          { className: 'ak-chip', 'data-kind': item.kind, title: item.text ? item.text.slice(0, 400) : item.label },
          item.image
            ? el('img', {
                className: 'ak-chip-image',
                src: `data:${item.media_type ?? 'image/png'};base64,${item.image}`,
                alt: ''
              })
            : null,
          `${item.kind}: ${item.label}`,
          el(
            'button',
            {
              className: 'ak-chip-remove',
              title: 'Remove',
              'aria-label': `Remove ${item.label}`,
              onclick: () => {
                this.attachments.splice(i, 1);
                this.drawChips();
              }
            },
            '×'
          )
        )
      )
    );
  }

  private target: NotebookPanel | null = null;
  private lastStatusTarget: NotebookPanel | null = null;
  private pinned = false;
  private aboutKernel = false;
  private future: Kernel.IShellFuture<KernelMessage.IExecuteRequestMsg, KernelMessage.IExecuteReplyMsg> | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private attachments: IAttachment[] = [];
  private sessions: ISession[] = [];
  private sessionChoice = '';
  private newSession = false;
  private head = new Widget();
  private log = new Panel();
  private turns = new Panel();
  private foot = new Widget();
  private historyNode = el('div', { className: 'ak-chat-history' });
  private sentTurns = 0; // turns sent from this chat whose turn_ended has not come yet
  private statusNode = el('div', { className: 'ak-chat-status', role: 'status' });
  private settingsNode = el('div', {
    className: 'ak-chat-settings',
    role: 'toolbar',
    'aria-label': 'Settings of the next turns'
  });
  private secrets = new SecretsRow(
    () => this.notebook?.sessionContext.session?.kernel ?? null,
    (text, state) => this.say(text, state),
    () => this.future !== null
  );
  private approveNote = el('div', { className: 'ak-chat-approve-note ak-muted' });
  private chipsNode = el('div', { className: 'ak-chat-chips' });
  private meterNode = el('span', { className: 'ak-chat-meter ak-muted' });
  private input = el('textarea', {
    className: 'ak-chat-input jp-mod-styled',
    rows: 3,
    maxLength: LIMITS.promptChars,
    placeholder: 'Ask the agent (Enter sends, Shift+Enter new line, Escape stops)',
    'aria-label': 'Prompt for the agent'
  });
  private modelSelect = el('select', {
    className: 'ak-chat-model jp-mod-styled',
    'aria-label': 'Model of the next turns',
    title:
      'The model of the next turns from the panel or a cell (as %agent --model M): one of the configured models ' +
      "(AgentKernel.model, small_model, medium_model, large_model); default: the session's or AgentKernel.model"
  });
  private state: IPanelState | null = null;
  private pushing: Promise<void> = Promise.resolve();
  private restarted = false;
  private approveSelect = el('select', { className: 'ak-chat-approve jp-mod-styled' });
  private thinkSelect = el('select', {
    className: 'ak-chat-think jp-mod-styled',
    title: 'Thinking of the next turns from the panel or a cell (as %agent --think LEVEL)'
  });
  private sessionSelect = el('select', { className: 'ak-chat-session jp-mod-styled' });
  private notebookSelect = el('select', {
    className: 'ak-chat-notebook jp-mod-styled',
    onchange: () => this.onPickNotebook()
  });
}

const VALUE = Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, 'value')!;

/**
 * A compact select for the settings row: an icon, the chosen option's short text and a
 * caret, with the native select laid over them, transparent. The select keeps its
 * keyboard, its list of full texts and its accessible name; the face is redrawn whenever
 * the choice or the options change, also when the code sets the value.
 */
function compactSelect(select: HTMLSelectElement, icon: LabIcon, short: (text: string) => string): HTMLElement {
  const face = el('span', { className: 'ak-select-face', 'aria-hidden': 'true' });
  const wrap = el(
    'span',
    { className: 'ak-select-wrap ak-select-compact' },
    icon.element({ tag: 'span', className: 'ak-select-icon' }),
    face,
    caretDownEmptyIcon.element({ tag: 'span', className: 'ak-select-caret' }),
    select
  );
  const draw = () => {
    const option = select.selectedOptions[0];
    face.textContent = option ? short(option.textContent ?? '') : '';
  };
  select.addEventListener('change', draw);
  new MutationObserver(draw).observe(select, { childList: true, subtree: true, characterData: true });
  Object.defineProperty(select, 'value', {
    configurable: true,
    get: () => VALUE.get!.call(select),
    set: (value: string) => {
      VALUE.set!.call(select, value);
      draw();
    }
  });
  draw();
  return wrap;
}

/** `select` with JupyterLab's caret beside it, as its HTMLSelect draws one. */
function withCaret(select: HTMLSelectElement): HTMLElement {
  return el(
    'span',
    { className: 'ak-select-wrap' },
    select,
    caretDownEmptyIcon.element({ tag: 'span', className: 'ak-select-caret' })
  );
}

function chain<T>(first: ((msg: T) => void | PromiseLike<void>) | undefined, then: (msg: T) => void) {
  return async (msg: T) => {
    if (first) {
      await first(msg);
    }
    then(msg);
  };
}

/** A file from the file browser as an attachment: text, a notebook's cells, or an image. */
export async function fileAttachment(contents: Contents.IManager, path: string): Promise<IAttachment> {
  const model = await contents.get(path, { content: true });
  if (model.type === 'notebook') {
    const cells = (model.content?.cells ?? []) as { cell_type: string; source: string | string[] }[];
    const text = cells
      .map(c => `# [${c.cell_type}]\n${Array.isArray(c.source) ? c.source.join('') : c.source}`)
      .join('\n\n');
    return { kind: 'file', label: path, text };
  }
  if (model.type !== 'file') {
    throw new Error(`${path} is a ${model.type}, not a file`);
  }
  if (model.format === 'base64') {
    const mime = model.mimetype ?? '';
    if (mime === 'image/png' || mime === 'image/jpeg') {
      return { kind: 'file', label: path, image: String(model.content).replace(/\s/g, ''), media_type: mime };
    }
    throw new Error(
      `${path} is binary (${mime || 'unknown type'}): only text files and PNG or JPEG images can be attached`
    );
  }
  return { kind: 'file', label: path, text: String(model.content ?? '') };
}
