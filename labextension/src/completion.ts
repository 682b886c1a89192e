/**
 * Inline completion (ghost text, Tab accepts) from the server extension's
 * /agent-kernel/api/completion route, for JupyterLab's inline completer.
 *
 * JupyterLab debounces the requests made while typing (the provider's
 * debouncerDelay setting) and calls fetch() for each one it sends; a new fetch()
 * aborts the request still running, which closes it, and the server then closes
 * the model's stream. The answer streams as newline-delimited JSON: fetch()
 * waits for the first piece of text, stream() yields the rest as it arrives.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import {
  CompletionHandler,
  ICompletionProviderManager,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider
} from '@jupyterlab/completer';
import { URLExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';

import { KEY_CHANGED } from './keyfield';

const ROUTE = 'agent-kernel/api/completion';
// What is sent of the cells above at most (the server keeps the nearest that fit its budget).
const MAX_CELLS = 50;
const MAX_CELLS_CHARS = 60_000;
const MAX_BEFORE_CHARS = 20_000;
const MAX_AFTER_CHARS = 5_000;
// How long a "completion is off" answer is believed before asking the server again.
const STATUS_MS = 60_000;

export interface IStatus {
  enabled: boolean;
  model: string;
  reason: string | null;
}

/** `value` as GET /completion's answer (CompletionStatusJson), or null when it is not one. */
export function completionStatus(value: unknown): IStatus | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return null;
  }
  const { enabled, model, reason } = value as Record<string, unknown>;
  if (
    typeof enabled !== 'boolean' ||
    typeof model !== 'string' ||
    model.length > 200 ||
    !(reason === null || (typeof reason === 'string' && reason.length <= 2000))
  ) {
    return null;
  }
  return { enabled, model, reason };
}

/** The status bar's line while completion is off for want of a key ('' otherwise). */
export function keyStatusLine(status: IStatus | null): string {
  return status && !status.enabled && status.reason && /API key/.test(status.reason)
    ? 'Completion off: no API key'
    : '';
}

interface ILine {
  text?: string;
  done?: boolean;
  error?: string;
  off?: string;
}

interface IStreaming {
  lines: AsyncGenerator<ILine>;
  text: string;
}

export class AgentInlineCompletionProvider implements IInlineCompletionProvider {
  readonly identifier = 'agent-kernel:completion';
  readonly name = 'agent-kernel';
  readonly schema = {
    default: { debouncerDelay: 300, timeout: 20_000 }
  };

  private _running: AbortController | null = null;
  private _streams = new Map<string, IStreaming>();
  private _status: { at: number; value: Promise<IStatus | null> } | null = null;
  private _tokens = 0;

  constructor(private onStatus: (status: IStatus | null) => void = () => undefined) {
    document.addEventListener(KEY_CHANGED, () => {
      this._status = null; // a key stored or forgotten in the panel: ask the server again
      void this.status();
    });
  }

  async fetch(
    request: CompletionHandler.IRequest,
    context: IInlineCompletionContext
  ): Promise<IInlineCompletionList<IInlineCompletionItem>> {
    this._running?.abort();
    this._streams.clear();
    const running = new AbortController();
    this._running = running;
    const status = await this.status();
    if (!status?.enabled || running.signal.aborted) {
      return { items: [] };
    }
    const body = {
      before: request.text.slice(0, request.offset).slice(-MAX_BEFORE_CHARS),
      after: request.text.slice(request.offset).slice(0, MAX_AFTER_CHARS),
      cells_above: cellsAbove(context),
      language: language(context, request.mimeType)
    };
    let lines: AsyncGenerator<ILine>;
    try {
      lines = await post(body, running.signal);
    } catch (error) {
      if (error instanceof Refused) {
        this._status = null; // no key any more (forgotten elsewhere): the status bar says so
        void this.status();
      }
      return { items: [] }; // aborted by the next keystroke, or the server is gone
    }
    let first = '';
    // Read with next(), not for-await: leaving a for-await loop would close the stream.
    for (let next = await lines.next(); !next.done; next = await lines.next()) {
      const line = next.value;
      if (line.off) {
        this._status = { at: Date.now(), value: Promise.resolve(null) };
        return { items: [] };
      }
      if (line.error) {
        console.warn('agent-kernel: inline completion:', line.error);
        return { items: [] };
      }
      if (line.text) {
        first = line.text;
        break;
      }
    }
    if (!first) {
      return { items: [] };
    }
    const token = `agent-kernel-${++this._tokens}`;
    this._streams.set(token, { lines, text: first });
    return { items: [{ insertText: first, isIncomplete: true, token }] };
  }

  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }, undefined, unknown> {
    const streaming = this._streams.get(token);
    if (!streaming) {
      return;
    }
    try {
      for await (const line of streaming.lines) {
        if (line.text) {
          streaming.text += line.text;
          yield { response: { insertText: streaming.text, isIncomplete: true } };
        }
        if (line.error) {
          console.warn('agent-kernel: inline completion:', line.error);
        }
      }
    } catch {
      // aborted: a newer request replaced this one
    } finally {
      this._streams.delete(token);
    }
    yield { response: { insertText: streaming.text, isIncomplete: false } };
  }

  /** Whether the server completes (null when it cannot be asked), asked at most once a minute. */
  status(): Promise<IStatus | null> {
    const now = Date.now();
    if (!this._status || now - this._status.at > STATUS_MS) {
      const value = getStatus();
      this._status = { at: now, value };
      void value.then(this.onStatus);
    }
    return this._status.value;
  }
}

async function getStatus(): Promise<IStatus | null> {
  const settings = ServerConnection.makeSettings();
  try {
    const response = await ServerConnection.makeRequest(
      URLExt.join(settings.baseUrl, ROUTE),
      { method: 'GET' },
      settings
    );
    return response.ok ? completionStatus(await response.json()) : null;
  } catch {
    return null;
  }
}

async function post(body: unknown, signal: AbortSignal): Promise<AsyncGenerator<ILine>> {
  const settings = ServerConnection.makeSettings();
  const response = await ServerConnection.makeRequest(
    URLExt.join(settings.baseUrl, ROUTE),
    { method: 'POST', body: JSON.stringify(body), signal },
    settings
  );
  if (response.status === 400) {
    throw new Refused(await response.text());
  }
  if (!response.ok || !response.body) {
    const reply = await response.text();
    throw new Error(`inline completion: ${response.status} ${reply.slice(0, 200)}`);
  }
  return readLines(response.body.getReader());
}

/** A request the server refused (400: its input, or no key), with the server's sentence. */
class Refused extends Error {}

/** The JSON lines of a streamed response, each as soon as it is whole. */
async function* readLines(reader: ReadableStreamDefaultReader<Uint8Array>): AsyncGenerator<ILine> {
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let end = buffer.indexOf('\n');
      while (end >= 0) {
        const line = buffer.slice(0, end).trim();
        buffer = buffer.slice(end + 1);
        if (line) {
          yield JSON.parse(line) as ILine;
        }
        end = buffer.indexOf('\n');
      }
      if (done) {
        return;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** The sources of the code and Markdown cells above the active one, nearest last. */
function cellsAbove(context: IInlineCompletionContext): string[] {
  const panel = context.widget;
  if (!(panel instanceof NotebookPanel)) {
    return [];
  }
  const notebook = panel.content;
  const sources: string[] = [];
  let size = 0;
  for (let i = notebook.activeCellIndex - 1; i >= 0 && sources.length < MAX_CELLS; i--) {
    const model = notebook.widgets[i]?.model;
    if (!model || (model.type !== 'code' && model.type !== 'markdown')) {
      continue;
    }
    const source = model.sharedModel.getSource();
    if (size + source.length > MAX_CELLS_CHARS) {
      break;
    }
    size += source.length;
    sources.unshift(model.type === 'markdown' ? markdownAsComment(source) : source);
  }
  return sources;
}

function markdownAsComment(source: string): string {
  return source
    .split('\n')
    .map(line => `# ${line}`)
    .join('\n');
}

/** The language: the notebook's, else the editor's MIME type's (text/x-python: python). */
function language(context: IInlineCompletionContext, mimeType?: string): string {
  const panel = context.widget;
  let name: string | undefined;
  if (panel instanceof NotebookPanel) {
    const metadata = panel.model?.metadata;
    const info = metadata?.language_info as { name?: string } | undefined;
    const spec = metadata?.kernelspec as { language?: string } | undefined;
    name = info?.name || spec?.language || panel.sessionContext.kernelPreference.language;
  }
  if (!name && mimeType && mimeType !== 'text/plain') {
    name = mimeType.replace(/^(text|application)\/(x-)?/, '');
  }
  return name && /^[A-Za-z0-9_+#.\- ]{1,40}$/.test(name) ? name : 'python';
}

/** Registers the provider with JupyterLab's inline completer (Settings, Inline Completer turns it off). */
export const completionPlugin: JupyterFrontEndPlugin<void> = {
  id: 'agent-kernel:completion',
  description: 'Inline completion from the small model, through the server extension.',
  autoStart: true,
  requires: [ICompletionProviderManager],
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, manager: ICompletionProviderManager, statusBar: IStatusBar | null) => {
    const item = new Widget();
    item.addClass('ak-completion-status');
    item.node.setAttribute('role', 'status');
    const show = (status: IStatus | null): void => {
      item.node.textContent = keyStatusLine(status);
      item.node.title = keyStatusLine(status) ? (status?.reason ?? '') : '';
      item.setHidden(!item.node.textContent);
    };
    show(null);
    const provider = new AgentInlineCompletionProvider(show);
    manager.registerInlineProvider(provider);
    if (statusBar) {
      statusBar.registerStatusItem('agent-kernel:completion-status', { item, align: 'left', rank: 900 });
      void provider.status(); // say it at once, not at the first keystroke
    }
  }
};
