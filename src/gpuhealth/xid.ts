/**
 * XID codes after which a GPU is taken out of rotation until an operator
 * resets or replaces it. Sources (NVIDIA):
 *  - Xid catalog, "Resolution Bucket (Immediate Action)":
 *    https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
 *  - GPU memory error management (48/63/64/94/95 meanings):
 *    https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html
 *  - Dynamic page retirement (48/63/64 on pre-Ampere):
 *    https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html
 *  - Health Validation Xid checks (46, 48, … marked CRITICAL, action drain → reset_gpu):
 *    https://docs.nvidia.com/health-validation/reference/checks/xid.md
 * Application-class XIDs (13, 31, 43, 45: a process faulted, the GPU is fine)
 * are deliberately absent: draining a GPU because one client kernel crashed
 * would let any tenant take capacity down.
 */
export const FATAL_XIDS: ReadonlyMap<number, string> = new Map([
  [46, "GPU stopped processing"],
  [48, "double-bit (uncorrectable) ECC error"],
  [63, "ECC page retirement / row remap recorded: reset the GPU to apply it"],
  [64, "ECC page retirement / row remap failed"],
  [74, "NVLink error"],
  [79, "GPU has fallen off the bus"],
  [92, "high single-bit ECC error rate"],
  [94, "contained uncorrectable ECC error: reset the GPU to clear it"],
  [95, "uncontained uncorrectable ECC error"],
  [119, "GSP RPC timeout"],
  [120, "GSP error"],
  [154, "GPU recovery action changed: reset or reboot required"],
]);
