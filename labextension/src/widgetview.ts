/**
 * The renderer of `application/vnd.agent-kernel.widget-view+json`: a widget of ours (the
 * table block) whose output also carries a static rendering of it (`text/html`).
 *
 * JupyterLab ranks the plain widget view (`application/vnd.jupyter.widget-view+json`,
 * rank -10) above every static type, so when the kernel that held the widget's model is
 * gone (a saved notebook opened again) it shows "Error displaying widget: model not
 * found" although the static page is in the file. This renderer ranks above it and
 * shows the static rendering at once; it asks JupyterLab's own widget renderer (from the
 * output area's registry, once the notebook's widget manager is bound to it) for the
 * live view and shows that only when it has drawn a widget. While the model is missing,
 * and after its widget closes, the static rendering stays.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

import { htmlWithoutFetches } from './dom';

export const WIDGET_MIME_TYPE = 'application/vnd.agent-kernel.widget-view+json';
const WIDGET_VIEW_MIME_TYPE = 'application/vnd.jupyter.widget-view+json';

/** What this renderer needs of the registry of the output area it is in. */
interface IRegistry {
  getFactory(mimeType: string): IRenderMime.IRendererFactory | undefined;
  createRenderer(mimeType: string): IRenderMime.IRenderer;
}

/** The nearest enclosing widget (this one included) whose `name` passes `usable`. */
function enclosing<T>(widget: Widget, name: string, usable: (value: any) => boolean): T | null {
  for (let at: Widget | null = widget; at; at = at.parent) {
    const value = (at as any)[name];
    if (value && usable(value)) {
      return value as T;
    }
  }
  return null;
}

export class WidgetWithFallback extends Panel implements IRenderMime.IRenderer {
  private readonly fallback = new Widget();
  private model: IRenderMime.IMimeModel | null = null;
  private live: IRenderMime.IRenderer | null = null;
  private connecting = false;
  private observer: MutationObserver | null = null;

  constructor(private options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('ak-widget-view');
    this.fallback.addClass('ak-widget-fallback');
    this.fallback.addClass('jp-RenderedHTMLCommon');
    this.addWidget(this.fallback);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.model = model;
    const html = model.data['text/html'];
    // Sanitised whether or not the notebook is trusted, and nothing in it loads by itself.
    this.fallback.node.replaceChildren(
      typeof html === 'string' ? htmlWithoutFetches(this.options.sanitizer.sanitize(html)) : ''
    );
    if (this.live) {
      await this.live.renderModel(model);
    } else if (this.isAttached) {
      void this.connect(); // the static rendering is done; the live one may wait for a kernel
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    void this.connect();
  }

  dispose(): void {
    this.observer?.disconnect();
    this.observer = null;
    super.dispose();
  }

  /** Ask the notebook's widget renderer for the live view, once its manager is bound. */
  private async connect(): Promise<void> {
    if (this.live || this.connecting || !this.model) {
      return;
    }
    this.connecting = true;
    const session = enclosing<{ ready: Promise<void> }>(this, 'sessionContext', s => s.ready instanceof Promise);
    if (session) {
      // The widget manager binds its renderer to the notebook's registry when the kernel
      // is ready (a promise continuation that runs before this timer).
      await session.ready.catch(() => undefined);
      await new Promise(resolve => setTimeout(resolve, 0));
    }
    const registry = enclosing<IRegistry>(this, 'rendermime', r => typeof r.createRenderer === 'function');
    if (this.isDisposed || !registry?.getFactory(WIDGET_VIEW_MIME_TYPE)) {
      return;
    }
    const live = registry.createRenderer(WIDGET_VIEW_MIME_TYPE);
    this.live = live;
    live.hide();
    this.observer = new MutationObserver(() => this.showWhatIsDrawn());
    this.observer.observe(live.node, { childList: true });
    this.addWidget(live);
    await live.renderModel(this.model);
    this.showWhatIsDrawn();
  }

  /** The live view when it holds a widget, else the static rendering. */
  private showWhatIsDrawn(): void {
    const live = this.live;
    if (!live || live.isDisposed) {
      return;
    }
    if (live.node.firstElementChild !== null) {
      live.show();
      this.fallback.hide();
      return;
    }
    live.hide();
    this.fallback.show();
    if (live.hasClass('jupyter-widgets')) {
      // The widget manager gave up (no such model in this kernel): only its message is
      // left, which the static rendering stands for. The output stays static from now on.
      this.observer?.disconnect();
      this.observer = null;
      live.node.replaceChildren();
    }
  }
}

export const widgetViewExtension: IRenderMime.IExtension = {
  id: 'agent-kernel:widget-view-renderer',
  rendererFactory: {
    safe: false, // as the widget view it stands for: an untrusted notebook shows text/html
    mimeTypes: [WIDGET_MIME_TYPE],
    createRenderer: options => new WidgetWithFallback(options)
  },
  rank: -20, // ahead of the widget view (-10), which the same output carries for other front ends
  dataType: 'json'
};
