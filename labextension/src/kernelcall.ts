/**
 * Calls the panel makes on a notebook's kernel: one silent execute_request whose code is a
 * call on a base64 literal (that alphabet cannot end a Python string, so nothing typed in
 * the panel is read as code), and whose answer is read from its user_expressions.
 */
import type { Kernel } from '@jupyterlab/services';

/** base64 of the UTF-8 JSON of `value`. */
export function encodePayload(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** Run `code` silently in `kernel` and read `expression`'s JSON value; a refusal throws its message. */
export async function kernelCall(
  kernel: Kernel.IKernelConnection,
  code: string,
  expression?: string
): Promise<unknown> {
  const reply = await kernel.requestExecute({
    code,
    silent: true,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false,
    user_expressions: expression ? { state: expression } : {}
  }).done;
  const content = reply.content as { status: string; evalue?: string; user_expressions?: Record<string, any> };
  if (content.status !== 'ok') {
    throw new Error(content.evalue || 'the kernel refused it');
  }
  const result = content.user_expressions?.state;
  if (!expression) {
    return null;
  }
  if (!result || result.status !== 'ok') {
    throw new Error(result?.evalue || 'the kernel did not answer');
  }
  return result.data?.['application/json'] ?? null;
}
