/**
 * Names as a person reads them: a session or a job's author shown by what it is, never as
 * a raw id that wraps over lines in a narrow sidebar (the raw value stays in the title).
 */
import { LabIcon } from '@jupyterlab/ui-components';

import { relative } from './dom';

// A name that is an id: hex or a UUID, alone or after a prefix such as `jupyterlab:` or `kernel-`.
const RAW_ID = /^(?:[A-Za-z_]+[:-])?[0-9a-f]{8}(?:-?[0-9a-f]{4,}){1,}$|^(?:[A-Za-z_]+[:-])?[0-9a-f]{16,}$/i;

/** Whether `name` is an id rather than something a person chose or recognises. */
export function isRawId(name: string): boolean {
  return RAW_ID.test(name);
}

/** A session's name for a list or a select: the name, or when it is an id, when it started. */
export function readableName(name: string, createdAt: string | null): string {
  if (!isRawId(name)) {
    return name;
  }
  return createdAt ? `Session from ${relative(createdAt)}` : 'Unnamed session';
}

/** Who changed a job (`jupyterlab:<user id>`, `agent`, `cli`…) in words. */
export function readableActor(by: string): string {
  if (by === 'jupyterlab' || (by.startsWith('jupyterlab:') && isRawId(by))) {
    return 'a JupyterLab user';
  }
  return isRawId(by) ? 'an unnamed user' : by;
}

/** The archive button's picture: a box with a lid. */
export const archiveIcon = new LabIcon({
  name: 'agent-kernel:archive',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<path d="M3 4h18v5H3V4zm1 6h16v10H4V10zm5 2v2h6v-2H9z"/>' +
    '</g></svg>'
});

/** `text` cut to `chars` characters with an ellipsis: an option's text in a narrow select
 * (the full text goes in its title). */
export function shorten(text: string, chars = 28): string {
  return text.length > chars ? `${text.slice(0, chars - 1)}…` : text;
}

const icon = (name: string, path: string) =>
  new LabIcon({
    name: `agent-kernel:${name}`,
    svgstr:
      '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
      `<path d="${path}"/></g></svg>`
  });

/** The settings row's pictures: the model (a chip), thinking (a bulb), approval (a shield),
 * the session (a speech bubble). */
export const modelIcon = icon(
  'model',
  'M9 2h2v3h2V2h2v3h2a2 2 0 0 1 2 2v2h3v2h-3v2h3v2h-3v2a2 2 0 0 1-2 2h-2v3h-2v-3h-2v3H9v-3H7a2 2 0 0 1-2-2v-2H2v-2h3v-2H2V9h3V7a2 2 0 0 1 2-2h2V2zm-1 6v8h8V8H8z'
);
export const thinkIcon = icon(
  'think',
  'M12 2a7 7 0 0 1 4 12.7V17a1 1 0 0 1-1 1H9a1 1 0 0 1-1-1v-2.3A7 7 0 0 1 12 2zm-3 17h6v2a1 1 0 0 1-1 1h-4a1 1 0 0 1-1-1v-2z'
);
export const approveIcon = icon(
  'approve',
  'M12 2l8 3v6c0 5-3.4 9.4-8 11-4.6-1.6-8-6-8-11V5l8-3zm-1.2 13.6l6-6-1.4-1.4-4.6 4.6-2.2-2.2-1.4 1.4 3.6 3.6z'
);
export const sessionIcon = icon(
  'session',
  'M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2z'
);
