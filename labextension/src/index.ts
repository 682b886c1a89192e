/**
 * agent-kernel in JupyterLab (and Notebook 7): the chat in the right sidebar, the Agent
 * dashboard in the left one, and "Schedule this notebook…" in the notebook toolbar and the
 * file browser's menu.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ToolbarButton } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { attachCellMarks } from './cellmark';
import { attachNotebooks } from './channel';
import { completionPlugin } from './completion';
import { FailureWatcher } from './jobs';
import { offlinePlugin } from './offline';
import { registerChat } from './chatcommands';
import { ChatPanel } from './chatpanel';
import { AgentDashboard } from './panel';
import { scheduleNotebook } from './schedule';

const SCHEDULE = 'agent-kernel:schedule-notebook';
const SHOW_PANEL = 'agent-kernel:show-panel';
const SHOW_DASHBOARD = 'agent-kernel:show-dashboard';

const agentIcon = new LabIcon({
  name: 'agent-kernel:agent',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<path d="M12 2a2 2 0 0 1 2 2v1h3a3 3 0 0 1 3 3v9a3 3 0 0 1-3 3H7a3 3 0 0 1-3-3V8a3 3 0 0 1 3-3h3V4a2 2 0 0 1 2-2zm-3 8.5a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zm6 0a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3zM8 16v1.5h8V16H8z"/>' +
    '</g></svg>'
});

const dashboardIcon = new LabIcon({
  name: 'agent-kernel:dashboard',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<path d="M4 3h7v8H4V3zm9 0h7v5h-7V3zM4 13h7v8H4v-8zm9-3h7v11h-7V10z"/>' +
    '</g></svg>'
});

const clockIcon = new LabIcon({
  name: 'agent-kernel:schedule',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
    '<path d="M12 2a10 10 0 1 1 0 20 10 10 0 0 1 0-20zm0 2a8 8 0 1 0 0 16 8 8 0 0 0 0-16zm1 3v4.6l3.2 1.9-1 1.7L11 12.7V7h2z"/>' +
    '</g></svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'agent-kernel:plugin',
  description: 'The Agent chat, the Agent dashboard and "Schedule this notebook…".',
  autoStart: true,
  requires: [],
  optional: [INotebookTracker, IDefaultFileBrowser, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker | null,
    browser: IDefaultFileBrowser | null,
    palette: ICommandPalette | null
  ) => {
    if (notebooks) {
      attachNotebooks(notebooks, app);
      attachCellMarks(notebooks);
    }
    // The chat sits beside the notebook on the right, as other chat panels do (in JupyterLab
    // and in Notebook 7); the dashboard's lists and tables go to the left sidebar.
    const chatPanel = new ChatPanel(notebooks);
    chatPanel.title.icon = agentIcon;
    app.shell.add(chatPanel, 'right', { rank: 650 });
    const panel = new AgentDashboard(app, notebooks);
    panel.title.icon = dashboardIcon;
    app.shell.add(panel, 'left', { rank: 650 });
    chatPanel.chat.turnEnded = () => void panel.refresh();
    new FailureWatcher(run => {
      app.shell.activateById(panel.id);
      void panel.jobsManager.show(run.job_id);
    }).start();

    registerChat(app, chatPanel.chat, () => app.shell.activateById(chatPanel.id), notebooks, browser, palette);

    const refresh = () => void panel.refresh();

    app.commands.addCommand(SCHEDULE, {
      label: 'Schedule this notebook…',
      caption: 'Run this notebook later or on a schedule, with papermill',
      icon: clockIcon,
      execute: async args => {
        let path = args.path as string | undefined;
        if (!path && args.fromBrowser && browser) {
          const item = browser.selectedItems().next();
          path = item && !item.done ? item.value.path : undefined;
        }
        const current = notebooks?.currentWidget;
        if (!path && current) {
          path = current.context.path;
        }
        if (!path) {
          return;
        }
        const open = notebooks?.find(nb => nb.context.path === path);
        const save = open?.context.model.dirty ? () => open.context.save() : null;
        await scheduleNotebook(app.serviceManager.contents, path, save, refresh);
      }
    });

    app.commands.addCommand(SHOW_PANEL, {
      label: 'Show the Agent chat',
      execute: () => app.shell.activateById(chatPanel.id)
    });

    app.commands.addCommand(SHOW_DASHBOARD, {
      label: 'Show the Agent dashboard',
      caption: 'Sessions, scheduled jobs and their runs, items kept after untrusted content, stats',
      execute: () => app.shell.activateById(panel.id)
    });

    app.contextMenu.addItem({
      command: SCHEDULE,
      args: { fromBrowser: true },
      selector: '.jp-DirListing-item[data-file-type="notebook"]',
      rank: 10
    });

    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (nb: NotebookPanel) => {
        const button = new ToolbarButton({
          icon: clockIcon,
          className: 'ak-schedule-button',
          tooltip: 'Schedule this notebook…',
          onClick: () => {
            // A ToolbarButton toggles `pressed` on each click: this one opens a dialog, it is no toggle.
            button.pressed = false;
            void app.commands.execute(SCHEDULE, { path: nb.context.path });
          }
        });
        nb.toolbar.insertItem(10, 'agentKernelSchedule', button);
        return button;
      }
    });

    palette?.addItem({ command: SCHEDULE, category: 'Agent' });
    palette?.addItem({ command: SHOW_PANEL, category: 'Agent' });
    palette?.addItem({ command: SHOW_DASHBOARD, category: 'Agent' });
  }
};

export default [plugin, completionPlugin, offlinePlugin];
