/** Small DOM helpers: every piece of text goes in as text, never as HTML. */

import { showErrorMessage } from '@jupyterlab/apputils';

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { className?: string; title?: string; [attr: string]: any } = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) {
      continue;
    }
    if (key === 'className') {
      node.className = value;
    } else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key in node && typeof value !== 'string') {
      (node as any)[key] = value;
    } else {
      node.setAttribute(key, String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined) {
      continue;
    }
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** A button that runs `action`, shows its failure in a dialog titled `label`, then runs `after`. */
export function actionButton(label: string, action: () => Promise<unknown>, after: () => unknown): HTMLButtonElement {
  return el(
    'button',
    {
      className: 'ak-button',
      onclick: async () => {
        try {
          await action();
        } catch (error) {
          await showErrorMessage(label, (error as Error).message);
        }
        await after();
      }
    },
    label
  );
}

/** "3 min ago", "in 2 h": an ISO instant relative to now. */
export function relative(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  const abs = Math.abs(seconds);
  const [value, unit] =
    abs < 60 ? [abs, 's'] : abs < 3600 ? [abs / 60, 'min'] : abs < 86400 ? [abs / 3600, 'h'] : [abs / 86400, 'd'];
  const text = `${Math.round(value)} ${unit}`;
  return seconds < 0 ? `${text} ago` : `in ${text}`;
}

export function local(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : '';
}

export function duration(seconds: number | null): string {
  if (seconds === null || seconds === undefined) {
    return '';
  }
  return seconds < 60 ? `${seconds.toFixed(1)} s` : `${(seconds / 60).toFixed(1)} min`;
}

export function money(cost: number | null): string {
  return cost === null || cost === undefined ? '–' : `$${cost.toFixed(cost < 1 ? 4 : 2)}`;
}

// Elements a browser loads a resource for as soon as they are in the page.
const LOADING_TAGS = new Set([
  'IMG',
  'IMAGE',
  'PICTURE',
  'SOURCE',
  'VIDEO',
  'AUDIO',
  'TRACK',
  'IFRAME',
  'FRAME',
  'OBJECT',
  'EMBED',
  'LINK',
  'INPUT',
  'SCRIPT',
  'STYLE',
  'META',
  'BASE',
  'SVG',
  'USE'
]);
const LOADING_ATTRIBUTES = ['src', 'srcset', 'poster', 'background', 'ping', 'lowsrc', 'dynsrc', 'data', 'xlink:href'];

/**
 * `html` (already sanitised) as nodes that load nothing by themselves: each image becomes
 * a link to it ("🖼 image: alt (host/path)") the person clicks to open, other loading
 * elements become such a link or nothing, and loading attributes and styles with URLs
 * are dropped. The HTML is parsed in an inert <template>, so nothing is fetched before
 * the rewrite.
 */
export function htmlWithoutFetches(html: string): DocumentFragment {
  const template = document.createElement('template');
  template.innerHTML = html;
  const content = template.content;
  for (const node of Array.from(content.querySelectorAll('*'))) {
    if (!content.contains(node)) {
      continue; // inside an element already replaced
    }
    if (LOADING_TAGS.has(node.tagName.toUpperCase())) {
      node.replaceWith(...resourceLink(node));
      continue;
    }
    for (const name of LOADING_ATTRIBUTES) {
      node.removeAttribute(name);
    }
    const style = node.getAttribute('style');
    if (style !== null && /url\s*\(|image-set|@import|\\/i.test(style)) {
      node.removeAttribute('style');
    }
  }
  return content;
}

function resourceLink(node: Element): Node[] {
  const url = node.getAttribute('src') ?? node.getAttribute('href') ?? node.getAttribute('data') ?? '';
  const tag = node.tagName.toLowerCase();
  if (
    !/^(https?:)?\/\//i.test(url.trim()) ||
    !['img', 'image', 'video', 'audio', 'source', 'iframe', 'object', 'embed'].includes(tag)
  ) {
    return [];
  }
  const alt = node.getAttribute('alt') ?? '';
  const shown = url
    .trim()
    .replace(/^[a-z][a-z0-9+.-]*:(?=\/\/)/i, '')
    .replace(/^\/+/, '')
    .split(/[?#]/)[0]
    .slice(0, 80);
  const kind = tag === 'img' || tag === 'image' ? 'image' : tag;
  const label = alt ? `🖼 ${kind}: ${alt} (${shown})` : `🖼 ${kind}: ${shown}`;
  if (node.parentElement?.closest('a')) {
    return [el('span', { className: 'agent-kernel-image-link' }, label)]; // links do not nest
  }
  return [
    el(
      'a',
      {
        className: 'agent-kernel-image-link',
        href: url.trim(),
        title: url.trim(),
        target: '_blank',
        rel: 'noopener noreferrer'
      },
      label
    )
  ];
}
