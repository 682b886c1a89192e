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
