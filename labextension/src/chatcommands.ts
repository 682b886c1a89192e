/**
 * The ways into the Agent chat: a command (palette and shortcut) that opens it,
 * "Add to chat" on a cell, a selection, an output and a file, "Fix with agent" and
 * "Explain" on an error output, and "Ask the agent about this cell" on the cell toolbar.
 * Each opens the panel with the context attached as chips; nothing is sent until the
 * person presses Enter.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, showErrorMessage } from '@jupyterlab/apputils';
import { Cell, CodeCell } from '@jupyterlab/cells';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IOutputModel } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';

import { ChatView, fileAttachment, IAttachment, plainText } from './chat';
import { el } from './dom';

export const OPEN_CHAT = 'agent-kernel:open-chat';
export const ADD_CELL = 'agent-kernel:add-cell-to-chat';
export const ADD_SELECTION = 'agent-kernel:add-selection-to-chat';
export const ADD_OUTPUT = 'agent-kernel:add-output-to-chat';
export const ADD_FILE = 'agent-kernel:add-file-to-chat';
export const FIX_ERROR = 'agent-kernel:fix-with-agent';
export const EXPLAIN_ERROR = 'agent-kernel:explain-error';
export const ASK_CELL = 'agent-kernel:ask-about-cell';

export const FIX_PROMPT =
  "Fix the error in the attached cell: say what went wrong, then propose the corrected source with replace_cell on that cell's id, with run=true.";
export const EXPLAIN_PROMPT = 'Explain the attached error: what went wrong and why, in plain words.';
export const ASK_PROMPT = 'About the attached cell: ';

const askIcon = new LabIcon({
  name: 'agent-kernel:ask',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<path d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2zm4 5.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm4 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm4 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/>' +
    '</g></svg>'
});

/** The chat's commands, menus and error buttons; `show` brings the Agent chat forward. */
export function registerChat(
  app: JupyterFrontEnd,
  chat: ChatView,
  show: () => void,
  notebooks: INotebookTracker | null,
  browser: IDefaultFileBrowser | null,
  palette: ICommandPalette | null
): void {
  const open = (panel?: NotebookPanel | null) => {
    show();
    if (panel) {
      chat.follow(panel);
    }
    chat.focusPrompt();
  };
  const attach = (items: IAttachment[], prompt?: string) => {
    const panel = notebooks?.currentWidget ?? null;
    open(panel);
    for (const item of items) {
      chat.attach(item);
    }
    if (prompt !== undefined) {
      chat.setPrompt(prompt);
    }
  };
  const cellLabel = (panel: NotebookPanel, cell: Cell) => {
    const index = panel.content.widgets.indexOf(cell);
    return `${panel.context.path} cell ${index + 1} (id ${cell.model.id})`;
  };
  const cellItem = (panel: NotebookPanel, cell: Cell): IAttachment => ({
    kind: 'cell',
    label: cellLabel(panel, cell),
    text: cell.model.sharedModel.getSource()
  });

  app.commands.addCommand(OPEN_CHAT, {
    label: 'Chat with the agent',
    caption: 'Open the Agent chat for the current notebook',
    execute: () => open(notebooks?.currentWidget ?? null)
  });
  app.commands.addKeyBinding({ command: OPEN_CHAT, keys: ['Accel Shift Y'], selector: 'body' });

  app.commands.addCommand(ADD_CELL, {
    label: 'Add cell to chat',
    caption: "Attach this cell's source to the next prompt in the Agent chat",
    isEnabled: () => Boolean(notebooks?.activeCell),
    execute: () => {
      const panel = notebooks?.currentWidget;
      const cell = notebooks?.activeCell;
      if (panel && cell) {
        attach([cellItem(panel, cell)]);
      }
    }
  });

  app.commands.addCommand(ADD_SELECTION, {
    label: 'Add selection to chat',
    caption: 'Attach the selected text of this cell to the next prompt',
    isEnabled: () => Boolean(selectedText(notebooks?.activeCell ?? null)),
    execute: () => {
      const panel = notebooks?.currentWidget;
      const cell = notebooks?.activeCell;
      const text = selectedText(cell ?? null);
      if (panel && cell && text) {
        attach([{ kind: 'selection', label: `selection in ${cellLabel(panel, cell)}`, text }]);
      }
    }
  });

  app.commands.addCommand(ADD_OUTPUT, {
    label: 'Add output to chat',
    caption: 'Attach this output (its text, or its image) to the next prompt',
    execute: () => {
      const found = outputUnderMenu(app, notebooks);
      if (!found) {
        return;
      }
      const item = outputItem(found.output, `output of ${cellLabel(found.panel, found.cell)}`);
      if (!item) {
        void showErrorMessage('Add output to chat', 'This output has no text or PNG/JPEG image to attach.');
        return;
      }
      attach([item]);
    }
  });

  app.commands.addCommand(ADD_FILE, {
    label: 'Add to chat',
    caption: "Attach this file (text, a notebook's cells, or a PNG/JPEG image) to the next prompt",
    execute: async () => {
      const item = browser?.selectedItems().next();
      if (!item || item.done) {
        return;
      }
      try {
        attach([await fileAttachment(app.serviceManager.contents, item.value.path)]);
      } catch (error) {
        await showErrorMessage('Add to chat', (error as Error).message);
      }
    }
  });

  const errorCommand = (id: string, label: string, prompt: string) =>
    app.commands.addCommand(id, {
      label,
      caption: `${label}: opens the Agent chat with the failing cell and its traceback attached`,
      execute: args => {
        const panel = (notebooks?.find(nb => nb.id === args.notebook) ?? notebooks?.currentWidget) || null;
        const cell = panel?.content.widgets.find(c => c.model.id === args.cell) ?? notebooks?.activeCell ?? null;
        if (!panel || !cell) {
          return;
        }
        const traceback = errorText(cell);
        attach(
          [
            cellItem(panel, cell),
            ...(traceback
              ? [{ kind: 'error' as const, label: `error in ${cellLabel(panel, cell)}`, text: traceback }]
              : [])
          ],
          prompt
        );
      }
    });
  errorCommand(FIX_ERROR, 'Fix with agent', FIX_PROMPT);
  errorCommand(EXPLAIN_ERROR, 'Explain', EXPLAIN_PROMPT);

  app.commands.addCommand(ASK_CELL, {
    label: 'Ask the agent about this cell',
    caption: 'Ask the agent about this cell: opens the Agent chat with it attached',
    icon: askIcon,
    execute: () => {
      const panel = notebooks?.currentWidget;
      const cell = notebooks?.activeCell;
      if (panel && cell) {
        attach([cellItem(panel, cell)], ASK_PROMPT);
      }
    }
  });

  app.contextMenu.addItem({ command: ADD_CELL, selector: '.jp-Notebook .jp-Cell', rank: 30 });
  app.contextMenu.addItem({ command: ADD_SELECTION, selector: '.jp-Notebook .jp-Cell .jp-Editor', rank: 31 });
  app.contextMenu.addItem({ command: ADD_OUTPUT, selector: '.jp-Notebook .jp-OutputArea-child', rank: 32 });
  app.contextMenu.addItem({ command: ASK_CELL, selector: '.jp-Notebook .jp-Cell', rank: 33 });
  app.contextMenu.addItem({ command: ADD_FILE, selector: '.jp-DirListing-item[data-isdir="false"]', rank: 11 });
  for (const command of [OPEN_CHAT, ADD_CELL, ADD_SELECTION, ASK_CELL]) {
    palette?.addItem({ command, category: 'Agent' });
  }

  app.docRegistry.addWidgetExtension('Notebook', {
    createNew: (panel: NotebookPanel) => {
      watchErrors(app, panel);
    }
  });
}

/** The selected text in `cell`'s editor, or ''. */
function selectedText(cell: Cell | null): string {
  const editor = cell?.editor;
  if (!editor) {
    return '';
  }
  const { start, end } = editor.getSelection();
  const from = editor.getOffsetAt(start);
  const to = editor.getOffsetAt(end);
  return editor.model.sharedModel.getSource().slice(Math.min(from, to), Math.max(from, to));
}

/** An output as an attachment: a PNG/JPEG as an image, else its text, else null. */
function outputItem(output: IOutputModel, label: string): IAttachment | null {
  const data = output.data;
  for (const mime of ['image/png', 'image/jpeg'] as const) {
    const value = data[mime];
    if (typeof value === 'string' && value) {
      return { kind: 'output', label, image: value.replace(/\s/g, ''), media_type: mime };
    }
  }
  if (output.type === 'error') {
    const error = output.toJSON() as { ename?: string; evalue?: string; traceback?: string[] };
    return {
      kind: 'error',
      label,
      text: plainText((error.traceback ?? [`${error.ename}: ${error.evalue}`]).join('\n'))
    };
  }
  for (const mime of [
    'text/plain',
    'application/vnd.jupyter.stdout',
    'application/vnd.jupyter.stderr',
    'text/markdown',
    'text/html'
  ]) {
    const value = data[mime];
    if (typeof value === 'string' && value) {
      return { kind: 'output', label, text: plainText(value) };
    }
  }
  const text = (output.toJSON() as { text?: string | string[] }).text;
  if (text) {
    return { kind: 'output', label, text: plainText(Array.isArray(text) ? text.join('') : text) };
  }
  return null;
}

/** The output the context menu was opened on, with its cell and notebook. */
function outputUnderMenu(app: JupyterFrontEnd, notebooks: INotebookTracker | null) {
  const node = app.contextMenuHitTest(n => n.classList.contains('jp-OutputArea-child'));
  const panel = notebooks?.currentWidget;
  if (!node || !panel) {
    return null;
  }
  for (const cell of panel.content.widgets) {
    if (cell instanceof CodeCell && cell.node.contains(node)) {
      const index = cell.outputArea.widgets.findIndex(w => w.node === node);
      if (index >= 0 && index < cell.outputArea.model.length) {
        return { panel, cell, output: cell.outputArea.model.get(index) };
      }
    }
  }
  return null;
}

/** The cell's last error output as plain text (its traceback), or ''. */
function errorText(cell: Cell): string {
  if (!(cell instanceof CodeCell)) {
    return '';
  }
  const outputs = cell.outputArea.model;
  for (let i = outputs.length - 1; i >= 0; i--) {
    const item = outputItem(outputs.get(i), '');
    if (outputs.get(i).type === 'error' && item?.text) {
      return item.text;
    }
  }
  return '';
}

const AGENT_CELL = /^\s*%%?agent(\s|$)/;

/** "Fix with agent" and "Explain" under every error output of `panel`'s cells but the agent's own. */
function watchErrors(app: JupyterFrontEnd, panel: NotebookPanel): void {
  let scheduled = false;
  const decorate = () => {
    scheduled = false;
    for (const cell of panel.content.widgets) {
      if (!(cell instanceof CodeCell) || AGENT_CELL.test(cell.model.sharedModel.getSource())) {
        continue; // an %agent cell's error is the turn's own line (stopped, a limit): nothing to fix
      }
      const model = cell.outputArea.model;
      cell.outputArea.widgets.forEach((child, i) => {
        if (i >= model.length || model.get(i).type !== 'error' || child.node.querySelector('.ak-error-actions')) {
          return;
        }
        const args = { notebook: panel.id, cell: cell.model.id };
        child.node.append(
          el(
            'div',
            { className: 'ak-error-actions' },
            el(
              'button',
              {
                className: 'jp-Button jp-mod-styled jp-mod-accept ak-fix-button',
                title: 'Open the Agent chat with this cell and its traceback attached, to fix it',
                onclick: () => void app.commands.execute(FIX_ERROR, args)
              },
              'Fix with agent'
            ),
            el(
              'button',
              {
                className: 'jp-Button jp-mod-styled ak-explain-button',
                title: 'Open the Agent chat with this error attached, to explain it',
                onclick: () => void app.commands.execute(EXPLAIN_ERROR, args)
              },
              'Explain'
            )
          )
        );
      });
    }
  };
  const observer = new MutationObserver(() => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(decorate);
    }
  });
  observer.observe(panel.content.node, { childList: true, subtree: true });
  panel.disposed.connect(() => observer.disconnect());
}
