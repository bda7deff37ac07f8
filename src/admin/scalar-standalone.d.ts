/** The path of Scalar's standalone API reference bundle (inside the binary under `bun build --compile`). */
declare const standalone: string;
export default standalone;
