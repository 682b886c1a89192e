/**
 * The mark on cells an agent turn wrote after its session read untrusted content
 * (agent_kernel.cellmark): `metadata.agent_kernel = {session, turn, untrusted: true,
 * sources: [...]}`. Such a cell is code or text a hostile page may have steered, so it
 * shows a badge, "written after untrusted content (source)", with a Clear button: the
 * person clears the mark once they have reviewed the cell, after a confirmation dialog,
 * and the cell records who cleared it and when (`cleared`). The scheduler refuses to run
 * a notebook holding a marked cell; the agent's edits keep the mark (channel.ts).
 *
 * The mark comes from a notebook file, so it is untrusted input here too: it is checked
 * for its fields' types and sizes, shown as text only, and a mark that does not read as
 * one counts as untrusted.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { JSONObject } from '@lumino/coreutils';

const SESSION = /^[A-Za-z0-9_.:-]{0,64}$/;
const MOST_SOURCES = 3;
const SOURCE_CHARS = 200;
const LABEL_CHARS = 300;
const MOST_TURN = 1e9;
const MALFORMED = 'a malformed agent_kernel mark';
const FIELDS = new Set(['session', 'turn', 'untrusted', 'sources', 'cleared']);
export const MARKED_CLASS = 'ak-untrusted-cell';
const BADGE_CLASS = 'ak-untrusted-badge';

function isShortText(value: unknown, limit: number): value is string {
  return typeof value === 'string' && value.length <= limit;
}

/** `value` as a well-formed mark (a fresh copy), or null when it is not one. */
export function checkedMark(value: unknown): JSONObject | null {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return null;
  }
  const mark = value as JSONObject;
  if (Object.keys(mark).some(key => !FIELDS.has(key))) {
    return null;
  }
  const session = mark.session ?? '';
  const turn = mark.turn ?? 0;
  if (typeof session !== 'string' || !SESSION.test(session)) {
    return null;
  }
  if (typeof turn !== 'number' || !Number.isInteger(turn) || turn < 0 || turn > MOST_TURN) {
    return null;
  }
  if (mark.untrusted !== undefined && typeof mark.untrusted !== 'boolean') {
    return null;
  }
  const sources = mark.sources ?? [];
  if (
    !Array.isArray(sources) ||
    sources.length > MOST_SOURCES ||
    !sources.every(source => isShortText(source, SOURCE_CHARS))
  ) {
    return null;
  }
  const checked: JSONObject = { session, turn };
  if (mark.untrusted === true) {
    checked.untrusted = true;
    checked.sources = sources;
  }
  if (mark.cleared !== undefined) {
    const cleared = mark.cleared as JSONObject | null;
    if (
      !cleared ||
      typeof cleared !== 'object' ||
      Object.keys(cleared).some(key => !['by', 'at', 'sources'].includes(key)) ||
      !['by', 'at', 'sources'].every(key => isShortText(cleared[key] ?? '', LABEL_CHARS))
    ) {
      return null;
    }
    checked.cleared = { ...cleared };
  }
  return checked;
}

/** The sources of an untrusted mark ([] when it names none); null for a clean or no mark. */
export function untrustedSources(value: unknown): string[] | null {
  if (value === undefined) {
    return null;
  }
  const mark = checkedMark(value);
  if (mark === null) {
    return [MALFORMED];
  }
  return mark.untrusted === true ? (mark.sources as string[]) : null;
}

/** What the channel tells the kernel of a cell's mark: it checked, or an untrusted one. */
export function reportedMark(value: unknown): JSONObject {
  return checkedMark(value) ?? { session: '', turn: 0, untrusted: true, sources: [MALFORMED] };
}

/**
 * How many other people share the notebook's document now (its collaboration awareness);
 * 0 without real-time collaboration. Who wrote a cell is not recorded anywhere.
 */
export function otherPeople(panel: NotebookPanel): number {
  const shared = panel.context.model?.sharedModel as unknown as {
    awareness?: { getStates?: () => Map<number, unknown> };
  };
  const states = shared?.awareness?.getStates?.();
  const count = states instanceof Map ? states.size - 1 : 0;
  return Math.max(0, Math.min(count, 10_000));
}

/** Show the badge on marked cells of every notebook the tracker opens, kept up to date. */
export function attachCellMarks(notebooks: INotebookTracker): void {
  notebooks.widgetAdded.connect((_, panel) => {
    const refresh = () => showMarks(panel);
    const watched = new WeakSet<object>();
    const watch = () => {
      const model = panel.content.model;
      for (let i = 0; model && i < model.cells.length; i++) {
        const cell = model.cells.get(i);
        if (!watched.has(cell)) {
          watched.add(cell);
          cell.metadataChanged.connect(refresh);
        }
      }
      refresh();
    };
    void panel.context.ready.then(() => {
      panel.content.model?.cells.changed.connect(() => requestAnimationFrame(watch));
      watch();
    });
    panel.content.modelContentChanged.connect(() => requestAnimationFrame(refresh));
  });
}

function showMarks(panel: NotebookPanel): void {
  for (const cell of panel.content.widgets) {
    showMark(panel, cell);
  }
}

function showMark(panel: NotebookPanel, cell: Cell): void {
  const sources = untrustedSources(cell.model.getMetadata('agent_kernel'));
  const old = cell.node.querySelector(`:scope > .${BADGE_CLASS}`);
  if (sources === null) {
    old?.remove();
    cell.removeClass(MARKED_CLASS);
    return;
  }
  const text = `⚠ written after untrusted content${sources.length ? ` (${sources.join('; ')})` : ''}`;
  if (old && old.getAttribute('data-text') === text) {
    return;
  }
  old?.remove();
  cell.addClass(MARKED_CLASS);
  const badge = document.createElement('div');
  badge.className = BADGE_CLASS;
  badge.setAttribute('data-text', text);
  Object.assign(badge.style, {
    display: 'flex',
    gap: '8px',
    alignItems: 'center',
    padding: '2px 8px',
    margin: '0 0 2px 0',
    fontSize: 'var(--jp-ui-font-size1)',
    color: 'var(--jp-warn-color0)',
    background: 'var(--jp-warn-color3)',
    borderLeft: '3px solid var(--jp-warn-color1)'
  });
  badge.title =
    'An agent turn wrote this cell after its session read untrusted content, which may have ' +
    'steered it. Review it before you run it; the scheduler will not run this notebook until ' +
    'the mark is cleared.';
  const label = document.createElement('span');
  label.textContent = text; // text only: the sources come from the notebook file
  const clear = document.createElement('button');
  clear.className = 'ak-button ak-untrusted-clear';
  clear.textContent = 'Clear';
  clear.title = 'I reviewed this cell: clear the mark (recorded in the cell)';
  clear.onclick = () => void clearMark(panel, cell);
  badge.append(label, clear);
  cell.node.prepend(badge);
}

/** The person clears a cell's mark, after confirming; the cell records it. */
async function clearMark(panel: NotebookPanel, cell: Cell): Promise<void> {
  const sources = untrustedSources(cell.model.getMetadata('agent_kernel'));
  if (sources === null) {
    return;
  }
  const answer = await showDialog({
    title: 'Clear the untrusted mark?',
    body:
      'An agent turn wrote this cell after reading untrusted content' +
      (sources.length ? ` (${sources.join('; ')})` : '') +
      '. Clear the mark only once you have read the cell and trust what it does.',
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Clear the mark' })]
  });
  if (!answer.button.accept) {
    return;
  }
  const mark = checkedMark(cell.model.getMetadata('agent_kernel'));
  cell.model.setMetadata('agent_kernel', {
    session: (mark?.session as string | undefined) ?? '',
    turn: Number(mark?.turn ?? 0),
    cleared: {
      by: 'panel: JupyterLab, Clear on the cell',
      at: new Date().toISOString().replace(/\.\d+Z$/, '+00:00'),
      sources: sources.join('; ').slice(0, LABEL_CHARS)
    }
  });
  showMark(panel, cell);
}
