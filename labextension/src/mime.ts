/**
 * The renderer of `application/vnd.agent-kernel.turn+json`: one part of an agent turn
 * (a paragraph of the answer, a tool call, a notice) as each cell output carries it.
 *
 * The model's text arrives as HTML the kernel made from its Markdown (raw HTML off, an
 * allow-list sanitiser); it goes through JupyterLab's HTML sanitiser again here, and
 * without it the plain text is shown; nothing in it loads by itself (an image is a link
 * to it, see `htmlWithoutFetches`). Everything else is set as text. The factory is
 * marked safe, so a notebook that is not trusted renders it the same way. The elements
 * keep the class names of the kernel's HTML (agent-kernel-tool, -markdown, -muted, ...).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { el, htmlWithoutFetches } from './dom';
import { widgetViewExtension } from './widgetview';

export const MIME_TYPE = 'application/vnd.agent-kernel.turn+json';

export interface ITurnPart {
  version: number;
  part: 'text' | 'tool' | 'notice';
  text?: string;
  html?: string;
  level?: string;
  tool?: {
    name: string;
    status: string;
    summary?: string;
    input?: string;
    duration_ms?: number | null;
    detail?: string;
  };
  usage?: Record<string, unknown>;
}

const ICONS: Record<string, string> = {
  receiving: '…',
  running: '⏳',
  waiting: '⏸',
  ok: '✓',
  error: '✗',
  interrupted: '■',
  skipped: '–'
};

export class TurnRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('ak-turn');
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- IRenderer.renderModel returns a promise; this one renders at once
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const part = model.data[MIME_TYPE] as unknown as ITurnPart;
    this.node.replaceChildren();
    if (!part || typeof part !== 'object') {
      return;
    }
    if (part.part === 'text') {
      this.renderText(part.text ?? '', part.html);
    } else if (part.part === 'tool' && part.tool) {
      this.node.append(renderTool(part.tool));
    } else if (part.part === 'notice') {
      const level = ['error', 'warning', 'muted', 'info'].includes(part.level ?? '') ? part.level : 'info';
      const title = part.usage
        ? Object.entries(part.usage)
            .map(([k, v]) => `${k}: ${String(v)}`)
            .join('\n')
        : undefined;
      this.node.append(
        el('div', { className: `ak-turn-notice ak-turn-${level} agent-kernel-${level}`, title }, part.text ?? '')
      );
    }
  }

  private renderText(text: string, html: string | undefined): void {
    const box = el('div', { className: 'ak-turn-text agent-kernel-markdown jp-RenderedHTMLCommon' });
    if (typeof html === 'string') {
      // Parsed inert and rewritten before it joins the page: a remote image is a link.
      const content = htmlWithoutFetches(this.options.sanitizer.sanitize(html));
      for (const link of Array.from(content.querySelectorAll('a[href]'))) {
        link.setAttribute('target', '_blank'); // a click opens a tab; the notebook stays
        link.setAttribute('rel', 'noopener noreferrer');
      }
      box.append(content);
    } else {
      box.textContent = text;
    }
    this.node.append(box);
  }
}

function renderTool(tool: NonNullable<ITurnPart['tool']>): HTMLElement {
  const status = tool.status in ICONS ? tool.status : 'running';
  const timing = typeof tool.duration_ms === 'number' ? ` · ${Math.round(tool.duration_ms).toLocaleString()} ms` : '';
  const head = [
    el('span', { className: `ak-turn-icon ak-turn-status-${status}`, title: status }, ICONS[status]),
    ' ',
    el('code', {}, tool.name),
    ' ',
    el(
      'span',
      { className: 'ak-turn-summary' },
      `${tool.summary ?? ''}${timing}${tool.detail ? ` · ${tool.detail}` : ''}`
    )
  ];
  if (!tool.input) {
    return el('div', { className: `ak-turn-tool ak-turn-tool-${status} agent-kernel-tool` }, ...head);
  }
  return el(
    'details',
    { className: `ak-turn-tool ak-turn-tool-${status} agent-kernel-tool` },
    el('summary', {}, ...head),
    el('pre', { className: 'ak-turn-input' }, tool.input)
  );
}

const extension: IRenderMime.IExtension = {
  id: 'agent-kernel:turn-renderer',
  rendererFactory: {
    safe: true,
    mimeTypes: [MIME_TYPE],
    createRenderer: options => new TurnRenderer(options)
  },
  // Ahead of HTML (50) and Markdown (60): the same output also carries those for other front ends.
  rank: 10,
  dataType: 'json'
};

export default [extension, widgetViewExtension];
