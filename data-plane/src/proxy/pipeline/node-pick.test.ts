import { describe, expect, it } from "vitest";
import { fakeDispatch, RecordingHandler, stageWorld } from "../../testing/pipeline-fakes.js";
import { nodePick } from "./node-pick.js";

describe("node-pick stage", () => {
  function world() {
    const down = new Set<string>();
    let announce: (change: { upstream: string }) => void = () => {};
    const refused: string[] = [];
    const built = stageWorld({
      healing: {
        nodeUsable: (_upstream, address) => !down.has(address),
        healthChanges: (listener) => {
          announce = listener;
        },
        reportRefused: (_upstream, address) => refused.push(address),
      },
    });
    const dispatch = fakeDispatch();
    const stage = nodePick(built.deps)(dispatch);
    const pick = () => {
      const exchange = built.exchange();
      const above = new RecordingHandler();
      stage(exchange, above);
      return { exchange, above };
    };
    const setDown = (address: string) => {
      down.add(address);
      announce({ upstream: "u" });
    };
    return { pick, setDown, dispatch, refused };
  }

  it("picks only nodes in rotation, from a picker rebuilt when health changes", () => {
    const { pick, setDown } = world();
    const before = [pick(), pick(), pick()].map((p) => p.exchange.node!.address);
    expect(new Set(before).size).toBe(3);
    setDown("10.0.0.2:1");
    const after = [pick(), pick(), pick(), pick()].map((p) => p.exchange.node!.address);
    expect(after).not.toContain("10.0.0.2:1");
    expect(new Set(after)).toEqual(new Set(["10.0.0.1:1", "10.0.0.3:1"]));
  });

  it("fails fast with no_healthy_node when no node is in rotation", () => {
    const { pick, setDown, dispatch } = world();
    for (const address of ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]) setDown(address);
    const { above } = pick();
    expect(above.events).toEqual(["failure no_healthy_node"]);
    expect(dispatch.attempts).toHaveLength(0);
  });

  it("sends a retry to the node the retry reserved", () => {
    const { pick, dispatch } = world();
    const first = pick();
    expect(dispatch.attempts[0]!.exchange).toBe(first.exchange);
    const exchange = first.exchange;
    exchange.nextNode = exchange.healing.picker.items[2];
    nodePick(stageWorld().deps)(dispatch)(exchange, new RecordingHandler());
    expect(exchange.node!.address).toBe("10.0.0.3:1");
  });

  it("reports a node that refused the connection", () => {
    const { pick, dispatch, refused } = world();
    const { exchange } = pick();
    dispatch.attempts[0]!.start().fail("refused");
    expect(refused).toEqual([exchange.node!.address]);
  });
});
