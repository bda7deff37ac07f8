/**
 * The two libc calls Bun has no API for, through bun:ffi: execve (replace
 * this process's image, keeping its pid) and prctl(PR_SET_PDEATHSIG) (have
 * the kernel signal us when our parent dies). Linux with glibc only; each
 * call reports false where libc cannot be loaded, and callers fall back.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";

/** <linux/prctl.h> */
const PR_SET_PDEATHSIG = 1;

function loadLibc() {
  return dlopen("libc.so.6", {
    execve: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    prctl: { args: [FFIType.i32, FFIType.u64, FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.i32 },
  });
}

type Libc = ReturnType<typeof loadLibc>["symbols"];
let libc: Libc | null | undefined;

function symbols(): Libc | null {
  if (libc !== undefined) return libc;
  try {
    libc = process.platform === "linux" ? loadLibc().symbols : null;
  } catch {
    libc = null; // musl, or no libc.so.6 on the search path
  }
  return libc;
}

function cString(s: string): Buffer {
  return Buffer.from(`${s}\0`, "utf8");
}

/** A NULL-terminated char*[]; `keep` holds the strings so they outlive the call. */
function cStringArray(items: readonly string[], keep: Buffer[]): BigUint64Array {
  const arr = new BigUint64Array(items.length + 1);
  items.forEach((s, i) => {
    const buf = cString(s);
    keep.push(buf);
    arr[i] = BigInt(ptr(buf));
  });
  return arr;
}

/**
 * Replace this process with `file argv…` under `env`. Returns only when the
 * exec failed (or libc is unavailable): false. Nothing written to stdout
 * before the call may still be buffered, so call it before any output.
 */
export function execve(file: string, argv: readonly string[], env: Readonly<Record<string, string>>): boolean {
  const c = symbols();
  if (!c) return false;
  const keep: Buffer[] = [];
  const path = cString(file);
  const argvArr = cStringArray(argv, keep);
  const envArr = cStringArray(
    Object.entries(env).map(([k, v]) => `${k}=${v}`),
    keep,
  );
  c.execve(ptr(path), ptr(argvArr), ptr(envArr));
  keep.length = 0;
  return false;
}

/**
 * Ask the kernel to send `signal` to this process when its parent exits.
 * Linux ties this to the parent *thread* that forked us; llmgw spawns its
 * children from the main thread, which lives as long as the process.
 */
export function setParentDeathSignal(signal: number): boolean {
  const c = symbols();
  if (!c) return false;
  return c.prctl(PR_SET_PDEATHSIG, signal, 0, 0, 0) === 0;
}
