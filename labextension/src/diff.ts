/**
 * The card an `ask`-mode edit shows in the notebook before it applies: what the cell holds
 * now and what the agent proposes, side by side, with Accept and Reject. Every text the
 * model wrote is set as `textContent` of a `<pre>`: nothing it authored is rendered as
 * HTML or markdown, or run.
 */
import { Widget } from '@lumino/widgets';

export interface IProposal {
  title: string; // e.g. "The agent proposes to replace cell 3"
  current: string; // the source now ('' for an insert)
  proposed: string; // the new source ('' for a delete)
  note?: string; // e.g. "runs after the turn when accepted"
}

/** Show `proposal` at the end of `host`; resolves true on Accept, false on Reject. */
export function askAbout(host: HTMLElement, proposal: IProposal): { answer: Promise<boolean>; withdraw: () => void } {
  const card = new Widget();
  card.addClass('ak-edit-diff');
  const title = document.createElement('div');
  title.className = 'ak-edit-diff-title';
  title.textContent = proposal.title;
  const sides = document.createElement('div');
  sides.className = 'ak-edit-diff-sides';
  sides.append(side('Current', proposal.current, 'ak-edit-old'), side('Proposed', proposal.proposed, 'ak-edit-new'));
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
  accept.onclick = () => done(true);
  reject.onclick = () => done(false);
  Widget.attach(card, host);
  card.node.scrollIntoView({ block: 'nearest' });
  return { answer, withdraw: () => card.dispose() };
}

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
  element.className = `jp-Dialog-button jp-mod-styled ${mod}`;
  element.textContent = label;
  return element;
}
