/**
 * What the kernel's widget scripts (agent_kernel/display/js/*.js, anywidget ES modules) see:
 * anywidget's model and render arguments, and the constants the Python prepends to a script
 * (display/scripts.py; stop.py's INTERRUPT_AFTER_MS). The shared functions (js/ack.js,
 * js/attention.js) are scripts of their own that tsc checks with the rest. The model's traits are
 * whatever the widget's Python declares: `get` is untyped, and tsconfig.widgets.json checks
 * the scripts without noImplicitAny (strict off) but with strictNullChecks.
 */

interface WidgetModel {
  get(name: string): any; // a trait's type is the Python widget's
  set(name: string, value: unknown): void;
  save_changes(): void;
  send(content: object, callbacks?: unknown, buffers?: ArrayBuffer[]): void;
  on(event: string, callback: (message: any, buffers?: DataView[]) => void): void; // a custom message is the kernel's JSON
  off(event?: string, callback?: unknown): void;
  widget_manager?: { kernel?: { interrupt?: () => Promise<void> } };
}

interface RenderProps {
  model: WidgetModel;
  el: HTMLElement;
}

/** How long the Stop button waits for the turn's answer before it interrupts the kernel (stop.py). */
declare const INTERRUPT_AFTER_MS: number;

/*
 * The component scripts (component_frame.js, component_bridge.js) run in sealed frames;
 * components.py writes each slot below as a JSON literal before a script is sent.
 */

/** The component's state when it loads. */
declare const __AK_STATE__: Record<string, unknown>;
/** The component's own script. */
declare const __AK_CODE__: string;
/** The component's document, the inner frame's srcdoc. */
declare const __AK_DOCUMENT__: string;

interface Window {
  /** The bridge's API for the component's script (component_bridge.js). */
  ak: object;
}
