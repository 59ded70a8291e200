import type { ResourceKind } from "@clawgate/proto";
import type { ConfigModel } from "../snapshot/config-model.js";
import { byCodeUnits } from "./list-page.js";

/**
 * The names of each kind the model holds, sorted, kept from one list page to the next and
 * sorted again only after that kind changed: paging through 10,000 routes sorts them once,
 * not once per page.
 */
export class NameOrder {
  readonly #model: ConfigModel;
  readonly #sorted = new Map<ResourceKind, string[]>();
  readonly #unsubscribe: () => void;

  constructor(model: ConfigModel) {
    this.#model = model;
    this.#unsubscribe = model.onChange((change) => {
      if (change.replaced) this.#sorted.clear();
      for (const id of change.resources) {
        this.#sorted.delete(id.slice(0, id.indexOf("/")) as ResourceKind);
      }
    });
  }

  names(kind: ResourceKind): readonly string[] {
    let names = this.#sorted.get(kind);
    if (names === undefined) {
      names = [...this.#model.state[kind].keys()].sort(byCodeUnits);
      this.#sorted.set(kind, names);
    }
    return names;
  }

  close(): void {
    this.#unsubscribe();
  }
}
