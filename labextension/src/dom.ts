/** Small DOM helpers: every piece of text goes in as text, never as HTML. */

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

/** "3 min ago", "in 2 h": an ISO instant relative to now. */
export function relative(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  const abs = Math.abs(seconds);
  const [value, unit] =
    abs < 60
      ? [abs, 's']
      : abs < 3600
        ? [abs / 60, 'min']
        : abs < 86400
          ? [abs / 3600, 'h']
          : [abs / 86400, 'd'];
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
