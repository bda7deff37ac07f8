/** Pure parts of process supervision: who holds a port (/proc/net/tcp), what the agent says about it, how engines are bound to the agent. */
import { describe, expect, test } from "bun:test";
import { listenRefusal } from "../../src/agent/command.ts";
import { engineBinding, engineEnv } from "../../src/agent/engine-lifetime.ts";
import { isLlmgwCommand, listeningInodes } from "../../src/shared/port-holder.ts";

// Port 7070 = 0x1B9E. Row 1 listens on 127.0.0.1:7070, row 2 is an established connection to it, row 3 another port.
const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1B9E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99847 1 000000009800c3f9 100 0 0 10 0
   1: 0100007F:1B9E 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 99900 1 00000000d7d730a0 20 4 30 10 -1
   2: 00000000:B0E5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99830 1 00000000d7d730a0 100 0 0 10 0
`;
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1B9E 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5551 1 0000000000000000 100 0 0 10 0
`;

describe("port holder", () => {
  test("listening sockets by port, IPv4 and IPv6; connections are not holders", () => {
    expect(listeningInodes(TCP, 7070)).toEqual([99847]);
    expect(listeningInodes(TCP6, 7070)).toEqual([5551]);
    expect(listeningInodes(TCP, 45285)).toEqual([99830]);
    expect(listeningInodes(TCP, 8080)).toEqual([]);
    expect(listeningInodes("", 7070)).toEqual([]);
  });

  test("an earlier agent is recognised by its command line, through src/cli.ts or the launcher", () => {
    expect(isLlmgwCommand(["/opt/llmgw/node_modules/bun/bin/bun.exe", "/opt/llmgw/src/cli.ts", "agent", "--listen", "0.0.0.0:7070"], "agent")).toBe(true);
    expect(isLlmgwCommand(["/usr/local/bin/llmgw", "agent"], "agent")).toBe(true);
    expect(isLlmgwCommand(["bun", "/opt/llmgw/src/cli.ts", "serve"], "agent")).toBe(false);
    expect(isLlmgwCommand(["python3", "-m", "http.server", "agent"], "agent")).toBe(false);
  });

  test("the agent's refusal names the port, the pid and how to stop it", () => {
    const earlier = listenRefusal(7070, { pid: 4242, argv: ["bun", "/opt/llmgw/src/cli.ts", "agent", "--listen", "0.0.0.0:7070"] });
    expect(earlier).toBe(
      "port 7070 is held by an earlier llmgw agent, pid 4242 (bun /opt/llmgw/src/cli.ts agent --listen 0.0.0.0:7070). " +
        "Stop it first (kill 4242; under systemd: systemctl stop llmgw-agent), or give this one another --listen port",
    );
    expect(listenRefusal(7070, { pid: 99, argv: ["python3", "-m", "http.server", "7070"] })).toBe(
      "port 7070 is held by another process, pid 99 (python3 -m http.server 7070); free it or give the agent another --listen port",
    );
    expect(listenRefusal(7070, "unknown")).toStartWith("port 7070 is held by a process this user cannot see");
  });
});

describe("engine lifetime", () => {
  test("bound engines start under setpriv --pdeathsig and learn the agent's pid; detached ones neither", () => {
    const bound = engineBinding("bound", "/usr/bin/setpriv", 1234);
    expect(bound).toEqual({ lifetime: "bound", prefix: ["/usr/bin/setpriv", "--pdeathsig", "TERM", "--"], env: { LLMGW_PARENT_PID: "1234" }, warning: null });
    expect(engineBinding("bound", null, 1234).warning).toContain("setpriv (util-linux) not found");
    expect(engineBinding("detached", "/usr/bin/setpriv", 1234)).toEqual({ lifetime: "detached", prefix: [], env: {}, warning: null });
  });

  test("an engine never inherits the agent's own parent binding; the plan's variables win", () => {
    const agentEnv = { PATH: "/usr/bin", LLMGW_PARENT_PID: "1", CUDA_VISIBLE_DEVICES: "0,1,2,3" };
    expect(engineEnv(agentEnv, engineBinding("detached", null, 7), { CUDA_VISIBLE_DEVICES: "2" })).toEqual({ PATH: "/usr/bin", CUDA_VISIBLE_DEVICES: "2" });
    expect(engineEnv(agentEnv, engineBinding("bound", null, 7), {})).toEqual({ PATH: "/usr/bin", LLMGW_PARENT_PID: "7", CUDA_VISIBLE_DEVICES: "0,1,2,3" });
  });
});
