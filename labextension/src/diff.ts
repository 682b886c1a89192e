/**
 * The card an `ask`-mode edit shows in the notebook before it applies: what the cell holds
 * now and what the agent proposes, side by side, with Accept and Reject. Every text the
 * model wrote is set as `textContent` of a `<pre>`: nothing it authored is rendered as
 * HTML or markdown, or run.
 */
import { Widget } from '@lumino/widgets';

import { announce, mayTakeFocus } from './dom';

export interface IProposal {
  title: string; // e.g. "The agent proposes to replace cell 3"
  current: string; // the source now ('' for an insert)
  proposed: string; // the new source ('' for a delete)
  note?: string; // e.g. "runs after the turn when accepted"
  currentNow?: () => string; // the cell's source at the moment of Accept (replace, delete)
}

/** What the card says when the cell changed while it waited (Accept then asks again). */
export const CHANGED_NOTE =
  'This cell changed while the proposal waited: Current now shows what it holds. ' +
  'Accept replaces that with Proposed; Reject keeps it.';

/**
 * Show `proposal` at the end of `host`; resolves true on Accept, false on Reject. When the
 * cell no longer reads as Current at the moment of Accept (the person or a collaborator
 * typed), the card shows the new text with CHANGED_NOTE and waits for another answer: an
 * Accept only ever replaces text the person saw in the card.
 */
export function askAbout(host: HTMLElement, proposal: IProposal): { answer: Promise<boolean>; withdraw: () => void } {
  const card = new Widget();
  card.addClass('ak-edit-diff');
  const title = document.createElement('div');
  title.className = 'ak-edit-diff-title';
  title.id = `ak-edit-diff-${++cards}`;
  title.textContent = proposal.title;
  // A region named by its title that takes the focus: a screen reader says what waits.
  card.node.setAttribute('role', 'region');
  card.node.setAttribute('aria-labelledby', title.id);
  card.node.tabIndex = -1;
  const sides = document.createElement('div');
  sides.className = 'ak-edit-diff-sides';
  const current = side('Current', proposal.current, 'ak-edit-old');
  sides.append(current, side('Proposed', proposal.proposed, 'ak-edit-new'));
  let shown = proposal.current;
  card.node.append(title, sides);
  if (proposal.note) {
    const note = document.createElement('div');
    note.className = 'ak-edit-diff-note';
    note.textContent = proposal.note;
    card.node.append(note);
  }
  const buttons = document.createElement('div');
  buttons.className = 'ak-edit-diff-buttons';
  const accept = button('Accept', 'jp-mod-accept');
  const reject = button('Reject', 'jp-mod-reject');
  buttons.append(accept, reject);
  card.node.append(buttons);
  let settle: (value: boolean) => void = () => undefined;
  const answer = new Promise<boolean>(resolve => (settle = resolve));
  const done = (value: boolean) => {
    settle(value);
    card.dispose();
  };
  accept.onclick = () => {
    const now = proposal.currentNow?.() ?? shown;
    if (now === shown) {
      done(true);
      return;
    }
    shown = now;
    current.querySelector('pre')!.textContent = now || '(none)';
    let changed = card.node.querySelector('.ak-edit-diff-changed');
    if (!changed) {
      changed = document.createElement('div');
      changed.className = 'ak-edit-diff-note ak-edit-diff-changed';
      changed.setAttribute('role', 'alert'); // read out: the answer the person gave was not taken
      card.node.insertBefore(changed, buttons);
    }
    changed.textContent = CHANGED_NOTE;
  };
  reject.onclick = () => done(false);
  Widget.attach(card, host);
  card.node.scrollIntoView({ block: 'nearest' });
  announce(`${proposal.title}: Accept or Reject.`);
  if (mayTakeFocus()) {
    card.node.focus({ preventScroll: true });
  }
  return { answer, withdraw: () => card.dispose() };
}

let cards = 0;

function side(label: string, text: string, className: string): HTMLElement {
  const column = document.createElement('div');
  column.className = `ak-edit-diff-side ${className}`;
  const heading = document.createElement('div');
  heading.className = 'ak-edit-diff-label';
  heading.textContent = label;
  const source = document.createElement('pre');
  source.textContent = text || '(none)';
  column.append(heading, source);
  return column;
}

function button(label: string, mod: string): HTMLButtonElement {
  const element = document.createElement('button');
  element.type = 'button';
  element.className = `jp-Dialog-button jp-mod-styled ${mod}`;
  element.textContent = label;
  return element;
}
