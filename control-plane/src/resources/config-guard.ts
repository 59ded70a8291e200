/**
 * Key every config write puts in its own commit, so any two concurrent config writes conflict.
 * Its mod revision is therefore that of the newest config write through the API, deletes
 * included, which is how a control plane that lists the store learns when the config last
 * changed although a delete leaves no key behind (config-model.ts).
 */
export function configGuardKey(prefix: string): string {
  return `${prefix}meta/config-guard`;
}
