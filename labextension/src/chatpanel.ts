/**
 * The chat's own sidebar panel (JupyterLab's right sidebar, as other assistants; resizable
 * with the sidebar): the chat of chat.ts filling it, its conversation scrolling between a
 * header and the prompt box. The sessions, jobs, runs and stats live in the Agent
 * dashboard (panel.ts), so the chat keeps the whole width of its sidebar.
 */
import { INotebookTracker } from '@jupyterlab/notebook';
import { Panel } from '@lumino/widgets';

import { ChatView } from './chat';

/** The sidebar's id: the show-panel and open-chat commands bring it forward. */
export const CHAT_PANEL_ID = 'agent-kernel-panel';

export class ChatPanel extends Panel {
  constructor(notebooks: INotebookTracker | null) {
    super();
    this.id = CHAT_PANEL_ID;
    this.addClass('ak-chat-panel');
    this.title.caption = 'Agent chat: prompts run in the notebook’s kernel';
    this.chat = new ChatView(notebooks);
    this.addWidget(this.chat);
  }

  readonly chat: ChatView;
}
