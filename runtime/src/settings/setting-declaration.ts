import type { z } from "zod";

/**
 * One setting as a plane declares it, once: the loader, the error messages and `--help` all
 * read this, so the three can never disagree.
 */
export interface SettingDeclaration<T extends z.ZodType = z.ZodType> {
  /** Environment variable, e.g. `CLAWGATE_PROXY_LISTEN`. */
  variable: string;
  /** Flag without its dashes, e.g. `proxy-listen`. */
  flag: string;
  /** One line for `--help`: what it does and why its default is what it is. */
  doc: string;
  /** Validation of a value from any layer; the loader adds optionality and the default. */
  type: T;
  /** Value when no layer sets one; left out for settings that are unset by default. */
  default?: z.output<T>;
  /** How `--help` shows a default computed at boot or an unset that means something. */
  defaultText?: string;
  /** Kept out of error messages (tokens): only the field and its layer are named. */
  secret?: boolean;
}

export type SettingDeclarations = Record<string, SettingDeclaration>;

type DefaultedField<D extends SettingDeclarations> = {
  [K in keyof D]: D[K] extends { default: unknown } ? K : never;
}[keyof D];

/** The validated settings a declaration produces: a field with no default is optional. */
export type SettingsOf<D extends SettingDeclarations> = {
  readonly [K in DefaultedField<D>]: z.output<D[K]["type"]>;
} & {
  readonly [K in Exclude<keyof D, DefaultedField<D>>]?: z.output<D[K]["type"]>;
};

/** Identity that keeps each declaration's own types, so SettingsOf can read them. */
export function declareSettings<D extends SettingDeclarations>(declarations: D): D {
  return declarations;
}

/** How a value is spelt as text in a variable or flag, from the declared type. */
export type TextKind = "list" | "number" | "boolean" | "text";

export function textKind(declaration: SettingDeclaration): TextKind {
  switch (declaration.type.def.type) {
    case "array":
      return "list";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    default:
      return "text";
  }
}

/**
 * Turns the text of a variable or flag into the value the type expects: lists are
 * comma-separated, numbers decimal (fractions included, as the heap ratio needs). Text that
 * does not read as the kind passes through unchanged, so the type's error shows what was given.
 */
export function fromText(kind: TextKind, text: string): unknown {
  const trimmed = text.trim();
  switch (kind) {
    case "list":
      return text
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== "");
    case "number":
      return /^-?(\d+\.?\d*|\.\d+)$/.test(trimmed) ? Number(trimmed) : text;
    case "boolean":
      return trimmed === "true" ? true : trimmed === "false" ? false : text;
    case "text":
      return text;
  }
}
