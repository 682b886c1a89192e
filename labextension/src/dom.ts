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

let lastId = 0;

/** A label that names `control` for assistive technology (tied by `for`, the control given an id). */
export function labelFor(text: string, control: HTMLElement, className?: string): HTMLLabelElement {
  if (!control.id) {
    control.id = `ak-control-${++lastId}`;
  }
  return el('label', { for: control.id, className }, text);
}

/**
 * Say `text` through one polite live region of the page: a screen reader reads it once
 * it is done with what it reads now. Cleared first, so the same sentence twice is said twice.
 * The kernel's widgets (agent_kernel/display/js/attention.js) say theirs in the same region.
 */
export function announce(text: string): void {
  let region = document.getElementById('ak-announcer');
  if (!region) {
    region = el('div', { id: 'ak-announcer', className: 'ak-visually-hidden', role: 'status', 'aria-live': 'polite' });
    document.body.append(region);
  }
  const node = region;
  node.textContent = '';
  window.setTimeout(() => (node.textContent = text), 100);
}

/**
 * Whether something that now waits for the person may take the keyboard focus: not while
 * they type in another field (a cell's editor, a dialog's input), except the chat's prompt
 * box, whose prompt is what asked.
 */
export function mayTakeFocus(): boolean {
  const active = document.activeElement as HTMLElement | null;
  if (!active || active === document.body || active.closest('.ak-chat-input')) {
    return true;
  }
  const typing =
    active instanceof HTMLInputElement ||
    active instanceof HTMLTextAreaElement ||
    active instanceof HTMLSelectElement ||
    active.isContentEditable;
  return !typing;
}

const FOCUSABLE = 'button, input, select, textarea, summary, a[href], [tabindex]';

/** The element's identity within `root` across a redraw: its keyed rows and its own label. */
function focusPlace(node: Element, root: Element): { rows: string; own: string; index: number } {
  const rows: string[] = [];
  let scope: Element = root;
  for (let at: Element | null = node.parentElement; at && at !== root; at = at.parentElement) {
    const keys = Array.from(at.attributes)
      .filter(a => a.name.startsWith('data-') && a.name !== 'data-state')
      .map(a => `${a.name}=${a.value}`);
    if (keys.length) {
      rows.unshift(`${at.tagName}[${keys.join(',')}]`);
      if (scope === root) {
        scope = at;
      }
    }
  }
  const own = [
    node.tagName,
    node.getAttribute('name') ?? '',
    node.getAttribute('aria-label') ?? '',
    node.textContent ?? ''
  ]
    .join('|')
    .slice(0, 200);
  const index = Array.from(scope.querySelectorAll(FOCUSABLE)).indexOf(node);
  return { rows: rows.join(' '), own, index };
}

const keptRoots = new WeakSet<HTMLElement>();

/**
 * Keep the keyboard focus inside `root` when a redraw (a poll, an action's refresh) replaces
 * the focused control: focus moves to the control in the same row with the same label,
 * else the one at the same place in that row, else to what is left around it (`root` at
 * the most), never to the page.
 */
export function keepFocus(root: HTMLElement): void {
  if (keptRoots.has(root)) {
    return;
  }
  keptRoots.add(root);
  let last: HTMLElement | null = null;
  let place: ReturnType<typeof focusPlace> | null = null;
  let ancestors: HTMLElement[] = [];
  root.addEventListener('focusin', event => {
    const target = event.target as HTMLElement;
    if (target !== root) {
      last = target;
      place = focusPlace(target, root);
      ancestors = [];
      for (let at = target.parentElement; at && at !== root; at = at.parentElement) {
        ancestors.push(at);
      }
    }
  });
  root.addEventListener('focusout', () => {
    const left = last;
    window.setTimeout(() => {
      // Still in the page but no longer focused: the person moved on (a removed one was redrawn).
      if (left && left === last && left.isConnected && !root.contains(document.activeElement)) {
        last = place = null;
      }
    }, 0);
  });
  new MutationObserver(() => {
    const active = document.activeElement;
    if (!last || !place || last.isConnected || (active && active !== document.body)) {
      return;
    }
    const wanted = place;
    const candidates = Array.from(root.querySelectorAll<HTMLElement>(FOCUSABLE));
    const places = candidates.map(node => ({ node, at: focusPlace(node, root) }));
    const same =
      places.find(p => p.at.rows === wanted.rows && p.at.own === wanted.own) ??
      places.find(p => p.at.rows === wanted.rows && p.at.index === wanted.index) ??
      places.find(p => p.at.rows === '' && p.at.own === wanted.own);
    if (same) {
      same.node.focus({ preventScroll: true });
      return;
    }
    // Gone for good (an answered card): the nearest part of the page around it that is left.
    const around = ancestors.find(node => node.isConnected && root.contains(node)) ?? root;
    if (!around.hasAttribute('tabindex')) {
      around.tabIndex = -1;
    }
    around.focus({ preventScroll: true });
  }).observe(root, { childList: true, subtree: true });
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
