/**
 * Names of resources (`[a-z0-9][a-z0-9-]{0,62}`): the store key, the wire name, and a metric
 * label value, so the bound also keeps label cardinality and length in check.
 */
export const RESOURCE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export const RESOURCE_NAME_RULE =
  "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit";

export function isResourceName(value: string): boolean {
  return RESOURCE_NAME.test(value);
}
